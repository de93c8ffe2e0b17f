"""Pure pipeline decisions behind escalation and review: triggers, verdicts, bounded requests."""

from __future__ import annotations

import pytest

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode
from agent_failover.resilience.degrade import cached_output, static_output
from agent_failover.resilience.limits import MAX_REQUEST_BYTES
from agent_failover.resilience.pipeline import (
    UNREVIEWED,
    EscalationTrigger,
    critic_request,
    escalation_trigger,
    final_answer,
    parse_verdict,
    review_verdict,
    synthesis_request,
    trigger_reason,
)
from agent_failover.resilience.triage import bound_request_bytes, request_bytes


def _out(tier: int = 0, confidence: float = 1.0, **kw) -> AgentOutput:
    cap = Capability.FULL if tier <= 1 else Capability.DEGRADED
    return AgentOutput(
        role="critic",
        content=kw.pop("content", "text"),
        capability=kw.pop("capability", cap),
        tier=tier,
        route="r",
        model="m",
        confidence=confidence,
        **kw,
    )


def test_static_answer_of_a_critical_role_triggers() -> None:
    """Only critical roles escalate; a static answer always does."""
    static = _out(tier=3, confidence=0.2, capability=Capability.STATIC)
    assert escalation_trigger(static, critical=True) is EscalationTrigger.STATIC_FALLBACK
    assert escalation_trigger(static, critical=False) is None


def test_confidence_below_min_confidence_triggers() -> None:
    """A live but weak answer (tier 2 at 0.8) escalates below a 0.9 floor, not at 0.8."""
    weak = _out(tier=2, confidence=0.8)
    assert escalation_trigger(weak, critical=True, min_confidence=0.9) is (
        EscalationTrigger.LOW_CONFIDENCE
    )
    assert escalation_trigger(weak, critical=True, min_confidence=0.8) is None
    assert escalation_trigger(weak, critical=True) is None  # default 0: static only
    human = _out(confidence=0.1, reason_codes=[ReasonCode.HUMAN_PROVIDED])
    assert escalation_trigger(human, critical=True, min_confidence=0.9) is None


def test_fresh_cached_answer_of_a_critical_role_triggers(demo_policy: PolicyConfig) -> None:
    """A critical step answered from the cache (every model tier down) escalates even when
    the cached answer is fresh and above ``min_confidence`` (before: no trigger); a
    non-critical one does not, and a stale one below the floor stays ``low_confidence``."""
    role = demo_policy.role("critic")
    assert role.critical and role.min_confidence > 0

    def cached(age_s: float) -> AgentOutput:
        return cached_output(
            role, content="ok", data=None, route="r", model="m", age_s=age_s,
            reasons=[ReasonCode.MODEL_UNAVAILABLE], attempts=[], latency_ms=1.0,
        )  # fmt: skip

    fresh = cached(0.0)
    floor = role.min_confidence
    assert fresh.confidence > floor
    assert escalation_trigger(fresh, critical=True, min_confidence=floor) is (
        EscalationTrigger.CACHED_ONLY
    )
    assert escalation_trigger(fresh, critical=False, min_confidence=floor) is None
    old = cached(role.roster.cache.max_staleness_s * 0.99)
    assert old.confidence < floor
    assert escalation_trigger(old, critical=True, min_confidence=floor) is (
        EscalationTrigger.LOW_CONFIDENCE
    )
    reason = trigger_reason(EscalationTrigger.CACHED_ONLY, "critic", fresh, floor)
    assert "response cache" in reason and "every model tier down" in reason


def test_unusable_verdict_is_unreviewed_never_approve() -> None:
    """Garbage, a missing verdict or an unknown word never count as approval."""
    for data in (None, "approve", {}, {"verdict": "yes"}, {"verdict": None}, ["approve"]):
        assert parse_verdict(data) == (UNREVIEWED, [])
    assert parse_verdict({"verdict": "revise", "reasons": ["x"]}) == ("revise", ["x"])


def test_static_critic_is_unreviewed_whatever_its_data(demo_policy: PolicyConfig) -> None:
    """Even a static fallback whose data says approve does not review anything."""
    critic = demo_policy.role("critic")
    out = static_output(critic, []).model_copy(
        update={"data": {"verdict": "approve", "reasons": []}}
    )
    assert review_verdict(out) == (UNREVIEWED, [])


def test_human_verdict_counts_only_as_data() -> None:
    """A human's answer for the critic counts when it carries a verdict; prose does not."""
    human = _out(content='{"verdict": "approve"}', data={"verdict": "approve", "reasons": []})
    assert review_verdict(human) == ("approve", [])
    assert review_verdict(_out(content="looks fine to me", data=None)) == (UNREVIEWED, [])


def test_unreviewed_answer_says_so_and_is_less_confident() -> None:
    """The final answer of unreviewed work carries a note and a lower confidence."""
    synth = _out(content="the answer")
    reviewed, c1 = final_answer(synth, [], suppress_degraded=False, verdict="approve")
    unreviewed, c2 = final_answer(synth, [], suppress_degraded=False, verdict=UNREVIEWED)
    assert "not reviewed" in unreviewed and "not reviewed" not in reviewed
    assert c2 < c1


@pytest.mark.parametrize("build", [critic_request, synthesis_request])
def test_requests_over_many_huge_sections_are_bounded(build) -> None:
    """Eight 256 KiB sections exceed one activity input; triage drops whole sections (oldest
    first) until the request fits, and keeps the instruction."""
    sections = [(f"researcher#{i}", _out(content=f"{i}" * 256 * 1024)) for i in range(8)]
    kw = {"suppress_degraded": False} if build is synthesis_request else {}
    request = build("the task", sections, **kw)
    assert request_bytes(request) > MAX_REQUEST_BYTES
    bounded = bound_request_bytes(request, MAX_REQUEST_BYTES)
    assert bounded.fits and bounded.truncated
    assert request_bytes(bounded.request) <= MAX_REQUEST_BYTES
    assert bounded.request.messages[-1].content.startswith("Task: the task")
    kept = [m.content[: len("[researcher#7]")] for m in bounded.request.messages[:-1]]
    assert "[researcher#7]" in kept and "[researcher#0]" not in kept


def test_small_request_is_untouched() -> None:
    """Bounding a request that fits changes nothing (so replay sees the same input)."""
    request = critic_request("t", [("a#1", _out())])
    bounded = bound_request_bytes(request, MAX_REQUEST_BYTES)
    assert bounded.request == request and not bounded.truncated


def test_a_policy_without_a_planner_cannot_serve_the_pipeline() -> None:
    """Missing stage roles and a missing specialist are named; the shipped roles pass."""
    from agent_failover.resilience.pipeline import pipeline_policy_errors

    assert pipeline_policy_errors(["planner", "researcher", "critic", "synthesis"]) == []
    errors = pipeline_policy_errors(["researcher", "critic", "synthesis"])
    assert [p for p, _ in errors] == ["roles.planner"]
    assert [p for p, _ in pipeline_policy_errors(["planner", "critic", "synthesis"])] == ["roles"]
