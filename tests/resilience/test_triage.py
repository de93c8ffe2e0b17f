"""Context triage: what is always kept, what goes first, and that fits=True really fits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.contracts import ReasonCode
from agent_failover.resilience.models import ChatRequest, Message, Priority, ToolCall
from agent_failover.resilience.tokens import heuristic_tokens, text_tokens
from agent_failover.resilience.triage import minimal_input_tokens, triage
from tests.resilience.helpers import PROPERTY


def msg(role: str, content: str, priority: Priority = Priority.SUPPORTING, **kw) -> Message:
    """A message with the given role, text and priority."""
    return Message(role=role, content=content, priority=priority, **kw)


def latest(req: ChatRequest, role: str) -> Message | None:
    return next((m for m in reversed(req.messages) if m.role == role), None)


message = st.builds(
    lambda role, text, prio: msg(role, text, prio),
    st.sampled_from(["user", "assistant", "tool"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=400),
    st.sampled_from(list(Priority)),
)
requests = st.builds(
    lambda system, msgs: ChatRequest(system=system, messages=msgs),
    st.one_of(st.none(), st.text(max_size=200)),
    st.lists(message, min_size=1, max_size=25),
)


@PROPERTY
@given(requests, st.integers(min_value=0, max_value=3000))
def test_triage_invariants(req: ChatRequest, budget: int) -> None:
    """System, latest user and latest tool results survive; fits=True means it fits."""
    result = triage(req, budget, estimator=heuristic_tokens)
    out = result.request
    assert out.system == req.system
    for role in ("user", "tool"):
        if latest(req, role) is not None:
            assert latest(out, role) == latest(req, role)
    assert result.input_tokens_before == heuristic_tokens(req)
    assert result.input_tokens_after == heuristic_tokens(out)
    assert result.fits == (result.input_tokens_after <= budget)
    assert result.truncated == bool(result.dropped)
    assert result.reason_codes == ([ReasonCode.CONTEXT_TRUNCATED] if result.dropped else [])
    # Kept messages stay in their original order, and nothing is invented.
    kept = [i for i in range(len(req.messages)) if i not in {d.index for d in result.dropped}]
    assert out.messages == [req.messages[i] for i in kept]
    if not result.fits:
        assert result.input_tokens_after == minimal_input_tokens(req, heuristic_tokens)


def test_fitting_request_is_untouched() -> None:
    """A request already within budget comes back unchanged, with no reason codes."""
    req = ChatRequest(messages=[msg("user", "hi")])
    result = triage(req, 1000)
    assert result.request == req and result.fits and not result.truncated
    assert result.reason_codes == []


def test_drop_order_background_then_supporting_then_middle() -> None:
    """Background goes first, then supporting; critical history is cut from the middle."""
    body = "x" * 400  # 100 tokens + 4 overhead each
    req = ChatRequest(
        messages=[
            msg("user", "task " + body, Priority.CRITICAL),  # 0
            msg("assistant", body, Priority.CRITICAL),  # 1
            msg("user", body, Priority.SUPPORTING),  # 2
            msg("assistant", body, Priority.CRITICAL),  # 3
            msg("user", body, Priority.BACKGROUND),  # 4
            msg("assistant", body, Priority.CRITICAL),  # 5
            msg("user", "question?", Priority.CRITICAL),  # 6
        ]
    )
    before = heuristic_tokens(req)
    one = triage(req, before - 1, estimator=heuristic_tokens)
    assert [(d.index, d.stage) for d in one.dropped] == [(4, "background")]
    two = triage(req, before - 150, estimator=heuristic_tokens)
    assert [(d.index, d.stage) for d in two.dropped] == [(2, "supporting"), (4, "background")]
    three = triage(req, before - 250, estimator=heuristic_tokens)
    # Critical history [0, 1, 3, 5] is cut middle-out; the tie between 1 and 3 goes older.
    assert [(d.index, d.stage) for d in three.dropped] == [
        (1, "middle"), (2, "supporting"), (4, "background"),
    ]  # fmt: skip
    assert three.fits and three.request.messages[0].content.startswith("task")


def test_tool_call_and_results_are_dropped_together() -> None:
    """An old assistant tool call and its results go as one unit; the latest pair stays."""
    call = ToolCall(id="c1", name="search", arguments={"q": "a"})
    call2 = ToolCall(id="c2", name="search", arguments={"q": "b"})
    req = ChatRequest(
        messages=[
            msg("user", "start", Priority.CRITICAL),
            msg("assistant", "", Priority.BACKGROUND, tool_calls=[call]),
            msg("tool", "r" * 2000, Priority.SUPPORTING, tool_call_id="c1"),
            msg("user", "next", Priority.CRITICAL),
            msg("assistant", "", Priority.BACKGROUND, tool_calls=[call2]),
            msg("tool", "s" * 2000, Priority.BACKGROUND, tool_call_id="c2"),
        ]
    )
    result = triage(req, heuristic_tokens(req) - 10, estimator=heuristic_tokens)
    assert [d.index for d in result.dropped] == [1, 2]
    assert [m.tool_call_id for m in result.request.messages if m.role == "tool"] == ["c2"]
    assert result.request.messages[-2].tool_calls == [call2]


def test_protected_parts_alone_too_big() -> None:
    """When the protected messages alone exceed the budget, fits is False and they remain."""
    req = ChatRequest(system="s", messages=[msg("user", "old"), msg("user", "y" * 4000)])
    result = triage(req, 100, estimator=heuristic_tokens)
    assert not result.fits and result.truncated
    assert [m.content for m in result.request.messages] == ["y" * 4000]


def test_heuristic_counts_non_ascii_per_char() -> None:
    """ASCII costs ~1 token per 4 chars; every non-ASCII char costs one token."""
    assert text_tokens("abcd" * 10) == 10
    assert text_tokens("日本語") == 3
    assert text_tokens("") == 0
