"""Prefill: a trailing assistant turn is continued, as a real model does."""

from __future__ import annotations

from agent_failover.testing.sim.content import ParsedRequest, build_reply
from agent_failover.testing.sim.faults import AttemptPlan


def _reply(messages: list[tuple[str, str]]) -> str:
    req = ParsedRequest(model="claude-sonnet-4-5", messages=messages, max_tokens=200)
    return build_reply(req, plan=AttemptPlan(), reply_id="r", created=0, max_output_tokens=200).text


def test_prefill_is_continued_not_repeated() -> None:
    """prefill + continuation equals the answer the same model gives without a prefill."""
    convo = [("user", "resume a cut answer please")]
    full = _reply(convo)
    partial = full[:23]
    continuation = _reply([*convo, ("assistant", partial)])
    assert partial + continuation == full
    assert not continuation.startswith(partial)


def test_foreign_prefill_gets_a_full_answer_after_it() -> None:
    """A prefill the model would not have written is still continued, not echoed."""
    convo = [("user", "resume a cut answer please")]
    continuation = _reply([*convo, ("assistant", "Something else entirely")])
    assert continuation == _reply(convo)
