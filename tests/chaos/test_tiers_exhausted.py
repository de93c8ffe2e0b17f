"""Chaos: every live tier down at once. Pipelines must still end, each with the static
answer or an explicit (timed-out) escalation, and the dead routes must not be hammered."""

from __future__ import annotations

import pytest

from agent_failover.resilience.contracts import Capability, ReasonCode
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import EscalationState
from tests.chaos.conftest import build_worker
from tests.chaos.helpers import (
    ENDPOINTS,
    assert_conduct,
    assert_consistent,
    results_of,
    start_pipeline,
)
from tests.workflows.conftest import running

pytestmark = [pytest.mark.chaos, pytest.mark.devserver]

#: A different way down per endpoint, so every failure class meets the static tier.
DOWN = {
    "anthropic-us-east": {"kind": "overloaded"},
    "anthropic-eu-west": {"kind": "connection_reset"},
    "bedrock-us-west-2": {"kind": "stream_error_event", "error_type": "rate_limit"},
    "vertex-europe-west1": {"kind": "auth_error"},
    "openai-us": {"kind": "server_error"},
    "cheap-mini": {"kind": "unavailable"},
    "gemini-flash": {"kind": "rate_limit", "retry_after": 30},
}
CRITICAL = {"planner", "synthesis"}


async def test_every_tier_exhausted_ends_static_or_escalated(
    dev_env, policy, sim_admin: SimAdmin
) -> None:
    """Three pipelines accept static answers, three escalate and time out; all six end."""
    assert set(DOWN) == set(ENDPOINTS)
    for ep, fault in DOWN.items():
        await sim_admin.set_faults(ep, [fault])
    h, workers = build_worker(dev_env.client, policy)
    async with running(workers):
        quiet = [
            await start_pipeline(h, f"exhausted quiet {i}", escalate_on_critical_degraded=False)
            for i in range(3)
        ]
        loud = [
            await start_pipeline(
                h,
                f"exhausted loud {i}",
                escalate_on_critical_degraded=True,
                escalation_timeout_s=0.5,
            )
            for i in range(3)
        ]
        results = await results_of([*quiet, *loud], timeout_s=25)
    for r in results:
        assert_consistent(r)
        for s in r.steps:
            assert s.output.capability is Capability.STATIC, (s.step, s.output.capability)
            assert ReasonCode.STATIC_FALLBACK in s.output.reason_codes
            assert s.output.tier == 3 and s.output.route is None
        # the static planner names one researcher subtask; the static answer is used
        assert [p["role"] for p in r.plan] == ["researcher"]
        assert r.degraded and r.summary.worst_tier == 3
    for r in results[:3]:
        assert r.escalation is EscalationState.NONE
        assert all(ReasonCode.ESCALATED not in s.output.reason_codes for s in r.steps)
    for r in results[3:]:
        # one escalation covered every critical stage: it timed out once, the policy
        # accepted degraded, and the later blocked stages were accepted under it
        assert r.escalation is EscalationState.TIMED_OUT
        escalated = {s.step for s in r.steps if ReasonCode.ESCALATED in s.output.reason_codes}
        assert escalated == {"planner", "critic#1", "synthesis"}, escalated
    seen = await sim_admin.attempts()
    got = assert_conduct(results, seen)
    calls = sum(len(r.steps) for r in results)
    # Not hammered: breakers and cool-downs keep dead routes well below one try per call.
    for ep in ENDPOINTS:
        assert got[ep] <= calls, (ep, got[ep], calls)
    # A 429 with Retry-After 30 s cools the route for every call, not just the one that
    # saw it: at most the calls already in flight when it came back reach it.
    assert got["gemini-flash"] <= len(results), got
