"""An outage longer than the cache TTL, on the time-skipping server: the degraded tier still
answers from the cache (stale, with decaying confidence) until ``max_staleness_s``, and a
critical role answered from a stale cache falls below its ``min_confidence``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig, RolePolicy
from agent_failover.resilience.contracts import Capability, ReasonCode
from agent_failover.resilience.pipeline import EscalationTrigger, escalation_trigger
from agent_failover.testing.sim.admin import SimAdmin
from tests.workflows.conftest import Harness, make_harness, running

HOUR = 3600.0


@pytest_asyncio.fixture
async def ts(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    """A worker on the time-skipping server with the shipped policy's cache tiers."""
    h, workers = await make_harness(ts_env.client, policy)
    async with running(workers):
        yield h


async def _outage(admin: SimAdmin, role: RolePolicy) -> None:
    """Every live route of ``role`` answers 529 overloaded until the test ends."""
    roster = role.roster
    for ep in (*roster.tier0, *roster.tier1, *roster.tier2):
        await admin.set_faults(ep, [{"kind": "overloaded"}])


async def test_three_hour_outage_is_answered_from_cache_past_ttl(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """One good answer, then every route down for three hours: the same task is answered
    from the cache at ttl + 1 s and every 30 minutes after, stale and less confident each
    time (before: the entry was deleted at ttl_s and every answer was the static one)."""
    role = ts.policy.role("plain")
    cache = role.roster.cache
    assert cache.ttl_s < 3 * HOUR < cache.max_staleness_s  # the shipped analyst: 30 min / 12 h
    task = "Summarize the incident review for the payments outage"
    first = await ts.call("plain", task, env=ts_env)
    assert first.capability is Capability.FULL
    await _outage(sim_admin, role)
    await ts_env.sleep(cache.ttl_s + 1)
    answers = [await ts.call("plain", task, env=ts_env)]
    for _ in range(6):  # three more hours, a call every 30 minutes
        await ts_env.sleep(HOUR / 2)
        answers.append(await ts.call("plain", task, env=ts_env))
    for out in answers:
        assert out.tier == 3 and out.capability is Capability.DEGRADED, out.reason_codes
        assert ReasonCode.CACHED_RESPONSE in out.reason_codes and out.content == first.content
        assert "stale" in out.attempts[-1].note
    assert cache.ttl_s + 1 <= answers[0].cache_age_s < cache.ttl_s + 60
    assert answers[-1].cache_age_s >= 3 * HOUR
    confidences = [out.confidence for out in answers]
    assert confidences == sorted(confidences, reverse=True) and confidences[-1] < 0.6


async def test_critical_step_from_a_stale_cache_escalates_with_the_shipped_policy(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """The shipped critic (fresh 10 min, served up to 1 h, min_confidence 0.5) answered from
    a 30-minute-old cache is below its min_confidence: the pipeline's low-confidence trigger
    fires (before: the entry was gone at 10 min, so only the static answer was reachable)."""
    critic = ts.policy.role("critic")
    cache = critic.roster.cache
    request = "Review: the rollout plan drains one region at a time and keeps a rollback."
    first = await ts.call("critic", request, env=ts_env)
    assert first.capability is Capability.FULL
    await _outage(sim_admin, critic)
    await ts_env.sleep(cache.ttl_s * 3)
    out = await ts.call("critic", request, env=ts_env)
    assert out.tier == 3 and ReasonCode.CACHED_RESPONSE in out.reason_codes
    assert out.confidence < critic.min_confidence
    floor = critic.min_confidence
    trigger = escalation_trigger(out, critical=critic.critical, min_confidence=floor)
    assert trigger is EscalationTrigger.LOW_CONFIDENCE
