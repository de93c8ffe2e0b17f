"""Failover decisions that take minutes of workflow time, on the time-skipping server.

At the code's default monitor settings (probes every 10 s): a latency-demoted route comes
back within interval x (restore_after + 1) = 40 s and stays; a route with real traffic is
not probed; a probe that meets a 429 cools the route down instead of opening its breaker;
a 429 that failed over keeps the route out for Retry-After, not the breaker's open time.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import DEFAULT_PROBE_INTERVAL_S, PolicyConfig
from agent_failover.resilience.contracts import (
    BreakerState,
    CallOutcome,
    ReasonCode,
)
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import MonitorInput
from agent_failover.workflows.monitor import HealthMonitorWorkflow
from tests.workflows.conftest import Harness, make_harness, running

PRIMARY, OTHER_REGION = "anthropic-us-east", "anthropic-eu-west"
INTERVAL = DEFAULT_PROBE_INTERVAL_S  # 10 s, the code's default (seed 000)


@pytest_asyncio.fixture
async def ts(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    """A worker on the time-skipping server; role ``sla`` keeps the default SLA window,
    min_samples and restore_after, with a 300 / 600 ms line."""
    plain = policy.role("plain")
    sla = plain.sla.model_copy(update={"p95_ms": 300.0, "p99_ms": 600.0})
    assert (sla.window_s, sla.min_samples, sla.restore_after) == (60.0, 10, 3)
    role = plain.model_copy(update={"name": "sla", "sla": sla})
    p = policy.model_copy(update={"roles": {**policy.roles, "sla": role}})
    h, workers = await make_harness(ts_env.client, p)
    async with running(workers):
        yield h


async def _monitor(h: Harness, routes: list[str]) -> WorkflowHandle:
    return await h.client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(routes=routes, interval_s=INTERVAL),
        id=f"monitor-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
    )


async def _seen(admin: SimAdmin) -> Counter[str]:
    return Counter(a["endpoint"] for a in await admin.attempts())


async def test_demoted_route_is_restored_within_four_intervals_at_defaults(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """Probes every 10 s, SLA window 60 s, min_samples 10: the recovered primary is back by
    40 s and stays back for the next minute (before: never, a 60 s window holds 5 probes)."""
    now = (await ts_env.get_current_time()).timestamp()
    settings = ts.policy.breaker_for(PRIMARY)
    for i in range(12):
        slow = CallOutcome(route=PRIMARY, at=now - 12 + i, ok=True, latency_ms=2000.0, role="sla")
        await ts.health.record(slow, settings)
    first = await ts.call("sla", env=ts_env)
    assert first.route != PRIMARY and ReasonCode.SLA_DEMOTED in first.reason_codes
    monitor = await _monitor(ts, [PRIMARY])
    restored_at = None
    for step in range(1, 9):
        await ts_env.sleep(INTERVAL / 2)
        out = await ts.call("sla", env=ts_env)
        if out.route == PRIMARY and restored_at is None:
            restored_at = step * INTERVAL / 2
        if restored_at is not None:
            assert out.route == PRIMARY, f"flapped back at {step * INTERVAL / 2} s"
    assert restored_at is not None and restored_at <= INTERVAL * (3 + 1)
    for _ in range(10):  # a further minute of traffic: no flapping on the old window
        await ts_env.sleep(INTERVAL / 2)
        assert (await ts.call("sla", env=ts_env)).route == PRIMARY
    await monitor.terminate()


async def test_route_with_real_traffic_is_not_probed(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """A call every 6 s keeps the primary out of the probe rounds; the idle standby is
    probed every round (before: both probed every round)."""
    await ts.call(env=ts_env)
    monitor = await _monitor(ts, [PRIMARY, OTHER_REGION])
    calls = 1
    for _ in range(6):
        await ts_env.sleep(INTERVAL / 2)
        await ts.call(env=ts_env)
        calls += 1
    seen = await _seen(sim_admin)
    assert seen[PRIMARY] == calls, "the primary got probes on top of its real calls"
    assert seen[OTHER_REGION] >= 3
    await monitor.terminate()


async def test_probe_meeting_a_429_cools_down_instead_of_opening(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """The first probe gets 429 Retry-After 30 s: the breaker stays closed, and no probe
    spends the limit again until the 30 s have passed (before: the breaker opened)."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "rate_limit", "retry_after": 30}])
    monitor = await _monitor(ts, [PRIMARY])
    await ts_env.sleep(1)
    b = await ts.health.breaker(PRIMARY)
    assert b.state is BreakerState.CLOSED and b.cooldown_until is not None
    await sim_admin.clear()
    await ts_env.sleep(2 * INTERVAL)  # rounds at 12 and 24 s fall inside the cool-down
    assert (await _seen(sim_admin))[PRIMARY] == 1
    await ts_env.sleep(INTERVAL)  # 36 s: probed again
    assert (await _seen(sim_admin))[PRIMARY] == 2
    assert (await ts.health.breaker(PRIMARY)).state is BreakerState.CLOSED
    await monitor.terminate()


async def test_rate_limited_route_is_back_after_retry_after(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """429 with Retry-After 4 s (> max_wait_ms): fail over now; 5 s later the primary
    answers again (before: the breaker kept it out for its 8 s open duration, then trials)."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "rate_limit", "retry_after": 4}])
    first = await ts.call(env=ts_env)
    assert first.route != PRIMARY and ReasonCode.RATE_LIMITED in first.reason_codes
    await sim_admin.clear()
    await ts_env.sleep(5)
    again = await ts.call(env=ts_env)
    assert again.route == PRIMARY and again.tier == 0
