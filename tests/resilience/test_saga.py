"""The saga as values: idempotency keys, the compensation log's order and state machine."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.saga import (
    CompensationLog,
    CompensationStatus,
    IllegalCompensationMove,
    SideEffect,
    compensation_for,
    compensation_key,
    failure_may_have_applied,
    idempotency_key,
    render_args,
)
from tests.resilience.helpers import PROPERTY

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def effect(step: str, tool: str = "create_ticket", comp: str | None = "close_ticket") -> SideEffect:
    """An applied effect keyed by its step."""
    return SideEffect(
        step=step,
        tool=tool,
        idempotency_key=idempotency_key("wf", step, tool, {}),
        compensation_tool=comp,
        compensation_args={"id": step},
    )


@PROPERTY
@given(args=st.dictionaries(st.text(max_size=6), JSON, max_size=4))
def test_key_ignores_dict_order(args: dict) -> None:
    """The canonical form sorts keys: insertion order never changes the key."""
    reordered = dict(reversed(list(args.items())))
    assert idempotency_key("wf", "action#1", "t", args) == idempotency_key(
        "wf", "action#1", "t", reordered
    )


def test_key_depends_on_workflow_step_tool_and_args() -> None:
    """Each of the four inputs changes the key; the same inputs give the same key."""
    base = idempotency_key("wf-1", "action#1", "create_ticket", {"title": "x"})
    assert base == idempotency_key("wf-1", "action#1", "create_ticket", {"title": "x"})
    assert base.startswith("v1-") and len(base) == 3 + 64
    others = {
        idempotency_key("wf-2", "action#1", "create_ticket", {"title": "x"}),
        idempotency_key("wf-1", "action#2", "create_ticket", {"title": "x"}),
        idempotency_key("wf-1", "action#1", "post_message", {"title": "x"}),
        idempotency_key("wf-1", "action#1", "create_ticket", {"title": "y"}),
    }
    assert base not in others and len(others) == 4
    assert compensation_key(base, "close_ticket") != base


def test_to_compensate_is_newest_first_and_skips_done() -> None:
    """Undo order is the reverse of apply order; compensated and left entries drop out."""
    log = CompensationLog()
    _, b, c = (log.append(effect(s)) for s in ("a", "b", "c"))
    assert [e.effect.step for e in log.to_compensate()] == ["c", "b", "a"]
    log.mark_compensated(c.effect.idempotency_key)
    log.mark_failed(b.effect.idempotency_key, "tool_server_error: 500")
    assert [e.effect.step for e in log.to_compensate()] == ["b", "a"]
    log.mark_left(b.effect.idempotency_key)
    assert [e.effect.step for e in log.to_compensate()] == ["a"]
    assert log.get(b.effect.idempotency_key).error == "tool_server_error: 500"
    assert [e.effect.step for e in log.with_status(CompensationStatus.LEFT)] == ["b"]


def test_failed_compensation_may_be_retried_then_completes() -> None:
    """failed → failed → compensated is legal (operator retry); attempts are counted."""
    log = CompensationLog()
    key = log.append(effect("a")).effect.idempotency_key
    log.mark_failed(key, "boom")
    log.mark_failed(key, "boom again")
    entry = log.mark_compensated(key)
    assert entry.status is CompensationStatus.COMPENSATED
    assert entry.attempts == 3 and entry.error is None


@pytest.mark.parametrize("final", ["mark_compensated", "mark_left"])
def test_terminal_states_reject_every_move(final: str) -> None:
    """Compensated and left are final; a duplicate effect key is refused too."""
    log = CompensationLog()
    e = effect("a")
    key = log.append(e).effect.idempotency_key
    getattr(log, final)(key)
    with pytest.raises(IllegalCompensationMove):
        log.mark_compensated(key)
    with pytest.raises(IllegalCompensationMove):
        log.mark_failed(key, "x")
    with pytest.raises(IllegalCompensationMove):
        log.append(e)


def test_effects_without_compensation_are_never_undone() -> None:
    """A tool with no known or declared compensation is logged but not in to_compensate()."""
    log = CompensationLog()
    log.append(effect("a", tool="send_fax", comp=None))
    assert log.to_compensate() == []
    assert compensation_for("send_fax", None, {"id": "F-1"}, {}) == (None, {})


def test_compensation_gets_the_created_id_and_declared_args() -> None:
    """Default table, declared override, created id merged into the undo's arguments."""
    assert compensation_for("create_ticket", None, {"id": "T-7"}, {"reason": "saga"}) == (
        "close_ticket",
        {"reason": "saga", "id": "T-7"},
    )
    assert compensation_for("create_ticket", "archive_ticket", {}, {})[0] == "archive_ticket"


def test_render_args_fills_the_answer_without_touching_the_declaration() -> None:
    """The answer goes under answer_arg; the declared args (the key's input) stay as they are."""
    declared = {"title": "t"}
    assert render_args(declared, "body", "A") == {"title": "t", "body": "A"}
    assert render_args(declared, None, "A") == {"title": "t"}
    assert declared == {"title": "t"}


def test_log_round_trips_through_json() -> None:
    """The log is a value: it serializes into queries and escalation state unchanged."""
    log = CompensationLog()
    log.append(effect("a"))
    log.mark_failed(log.entries[0].effect.idempotency_key, "x")
    assert CompensationLog.model_validate_json(log.model_dump_json()) == log


def test_maybe_applied_is_undone_and_may_be_confirmed_or_found_empty() -> None:
    """maybe_applied is outstanding; → applied on a later success; → compensated (nothing
    applied) when the undo finds nothing; it can never move back to maybe_applied."""
    log = CompensationLog()
    a = log.append(effect("a"), maybe_applied=True)
    b = log.append(effect("b"), maybe_applied=True)
    assert a.status is CompensationStatus.MAYBE_APPLIED and a.maybe_applied
    assert [e.effect.step for e in log.to_compensate()] == ["b", "a"]
    log.confirm(a.effect.idempotency_key, {"id": "T-1"})
    assert a.status is CompensationStatus.APPLIED and a.effect.result == {"id": "T-1"}
    with pytest.raises(IllegalCompensationMove):
        log.confirm(a.effect.idempotency_key, {})
    done = log.mark_compensated(b.effect.idempotency_key, nothing_applied=True)
    assert done.label() == "compensated (nothing applied)"
    assert log.mark_compensated(a.effect.idempotency_key).label() == "compensated"
    assert log.to_compensate() == []


@pytest.mark.parametrize(
    ("timed_out", "error_type", "non_retryable", "maybe"),
    [
        (True, None, False, True),  # start-to-close / heartbeat timeout
        (False, "tool_server_error", False, True),  # retries exhausted on a 5xx
        (False, "tool_timeout", False, True),  # the HTTP call timed out
        (False, "tool_rejected", True, False),  # a 4xx: the tool says "not applied"
        (False, "tool_bad_reply", True, True),  # a 2xx we could not read: applied
    ],
)
def test_which_failures_may_have_applied(
    timed_out: bool, error_type: str | None, non_retryable: bool, maybe: bool
) -> None:
    assert (
        failure_may_have_applied(
            timed_out=timed_out, error_type=error_type, non_retryable=non_retryable
        )
        is maybe
    )


def test_compensation_of_a_maybe_applied_effect_carries_its_key() -> None:
    """No created id is known: the undo names the effect by its idempotency key."""
    assert compensation_for("post_message", None, {}, {}, effect_key="v1-k") == (
        "delete_message",
        {"effect_key": "v1-k"},
    )
