"""How a failed attempt reshapes the rest of the call (resilience.outcomes.apply_failure)."""

from __future__ import annotations

from agent_failover.resilience.contracts import ReasonCode
from agent_failover.resilience.outcomes import CallState, apply_failure

NOW = 1_000_000.0


def fail(state: CallState, error_type: str, **kw: object) -> CallState:
    args: dict[str, object] = {
        "route": "r1",
        "model": "m1",
        "context_window": 128_000,
        "error_type": error_type,
        "retry_after_s": None,
        "partial_text": "",
        "used_prefill": False,
        "now": NOW,
        "routes_by_model": {"m1": ["r1", "r2"]},
    }
    args.update(kw)
    return apply_failure(state, **args)  # type: ignore[arg-type]


def test_stated_window_wins_over_the_believed_one() -> None:
    """The provider said 32k though we believed 128k: smaller windows than 32k+1 are out,
    a 64k route stays eligible (before: everything up to 128k was dropped)."""
    s = fail(CallState(), "context_length", stated_context_window=32_000)
    assert s.min_context_window == 32_001 and "r1" in s.excluded
    assert ReasonCode.CONTEXT_TOO_LONG in s.reasons


def test_unknown_window_only_excludes_the_route() -> None:
    """No configured window and no statement: exclude the route, require nothing of others."""
    s = fail(CallState(), "context_length", context_window=None)
    assert s.min_context_window == 0 and s.excluded == ["r1"]


def test_rate_limit_cools_the_route_for_retry_after() -> None:
    """A 429 that failed over cools the route for this call for its Retry-After."""
    s = fail(CallState(), "rate_limited", retry_after_s=4.0)
    assert s.cooldowns == {"r1": NOW + 4.0}


def test_content_filter_excludes_the_same_model_elsewhere() -> None:
    """The same model in another region would refuse the same content."""
    s = fail(CallState(), "content_filter")
    assert s.excluded == ["r1", "r2"]


def test_a_whole_partial_text_becomes_the_prefill() -> None:
    """A cut stream's complete partial text is continued on a prefill-capable route."""
    s = fail(CallState(), "stream_cut", partial_text="The answer is")
    assert s.prefill_text == "The answer is"


def test_a_tail_is_never_continued() -> None:
    """Failure details keep only the tail of a long stream: continuing from a tail would
    splice an answer without its beginning, so the next route restarts instead."""
    s = fail(CallState(), "stream_cut", partial_text="…tail of an answer", partial_truncated=True)
    assert s.prefill_text == "" and "r1" in s.excluded


def test_invalid_request_the_boundary_marked_failover_moves_on() -> None:
    """A 400 only this route's model gives (Gemini 3's missing thought signature) carries
    decision failover from the provider boundary: the call moves on, live tiers go on."""
    stopped = fail(CallState(), "invalid_request")
    assert stopped.stop_live
    moved = fail(CallState(), "invalid_request", decision="failover")
    assert not moved.stop_live and moved.excluded == ["r1"]


def test_model_not_found_cools_the_route_and_moves_on() -> None:
    """A route whose model is not served is left for a while; the call does not stop."""
    s = fail(CallState(), "model_not_found")
    assert not s.stop_live and "r1" in s.cooldowns and s.excluded == ["r1"]


def test_local_saturation_moves_on_to_the_next_route() -> None:
    """Our own slots to r1 were full: the call moves on to the next route (r2, same model,
    has its own slots), with no cool-down and the live tiers still open."""
    s = fail(CallState(), "local_saturation")
    assert s.excluded == ["r1"]
    assert s.cooldowns == {} and not s.stop_live


#: Two routes on one wire (regions of one API), one on another, one on a third.
BY_WIRE = {"anthropic@anthropic": ["r1", "r2"], "bedrock@aws": ["r3"], "openai@openai": ["r4"]}


def test_one_wires_400_moves_the_call_to_another_wire() -> None:
    """A 400 from one wire says nothing about another vendor's API: the call leaves that
    wire (both its regions) and goes on with the live tiers."""
    s = fail(CallState(), "invalid_request", wire="anthropic@anthropic", routes_by_wire=BY_WIRE)
    assert not s.stop_live
    assert s.excluded == ["r1", "r2"] and s.rejected_wires == ["anthropic@anthropic"]
    assert ReasonCode.INVALID_REQUEST in s.reasons


def test_a_second_wire_rejecting_the_same_request_stops_the_call() -> None:
    first = fail(CallState(), "invalid_request", wire="anthropic@anthropic", routes_by_wire=BY_WIRE)
    second = fail(first, "invalid_request", route="r3", wire="bedrock@aws", routes_by_wire=BY_WIRE)
    assert second.stop_live
    assert second.rejected_wires == ["anthropic@anthropic", "bedrock@aws"]


def test_the_same_wire_twice_is_still_one_wire() -> None:
    """A second region of the same API rejecting it (planned before the first answered,
    as a hedge) does not count as a second opinion."""
    first = fail(CallState(), "invalid_request", wire="anthropic@anthropic", routes_by_wire=BY_WIRE)
    again = fail(first, "invalid_request", route="r2", wire="anthropic@anthropic",
                 routes_by_wire=BY_WIRE)  # fmt: skip
    assert not again.stop_live and again.rejected_wires == ["anthropic@anthropic"]


def test_context_length_and_content_filter_keep_their_own_rules_with_wires() -> None:
    """The wire rule is the 400's: a context-length or content-filter rejection with a
    wire given decides exactly as without one."""
    for error_type in ("context_length", "content_filter"):
        plain = fail(CallState(), error_type)
        wired = fail(CallState(), error_type, wire="anthropic@anthropic", routes_by_wire=BY_WIRE)
        assert wired.model_dump(exclude={"rejected_wires"}) == plain.model_dump(
            exclude={"rejected_wires"}
        )
        assert wired.rejected_wires == [] and not wired.stop_live
