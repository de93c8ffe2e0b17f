"""Return to the primary at the code's defaults, on the time-skipping server.

Probes every 10 s, breaker open for 30 s doubling to 300 s, 3 good trials to close. The
primary is down for ten minutes (so failed half-open trials have pushed its open duration
towards the cap), then heals: it takes real traffic again within two probe intervals
(before: up to the remaining open duration, 240 s here) and stays (no flapping). A
primary that flaps every few seconds never closes.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import (
    DEFAULT_PROBE_INTERVAL_S,
    BreakerSettings,
    PolicyConfig,
    ProbeSettings,
)
from agent_failover.resilience.contracts import BreakerState
from agent_failover.testing.servers import start_time_skipping
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import MonitorInput
from agent_failover.workflows.monitor import HealthMonitorWorkflow
from tests.workflows.conftest import Harness, make_harness, running

PRIMARY = "anthropic-us-east"
INTERVAL = DEFAULT_PROBE_INTERVAL_S  # 10 s


@pytest_asyncio.fixture
async def ts_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server of this test's own: minutes of monitor rounds must not wait
    behind another test's leftover activities (the server skips no time while one runs)."""
    env = await start_time_skipping()
    yield env
    await env.shutdown()


@pytest_asyncio.fixture
async def ts(ts_env: WorkflowEnvironment, policy: PolicyConfig) -> AsyncIterator[Harness]:
    """A worker whose breaker and probe settings are the code's defaults."""
    p = policy.model_copy(
        update={"breaker": BreakerSettings(), "breaker_overrides": {}, "probes": ProbeSettings()}
    )
    h, workers = await make_harness(ts_env.client, p)
    async with running(workers):
        yield h


async def _monitor(h: Harness) -> WorkflowHandle:
    return await h.client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(routes=[PRIMARY], interval_s=INTERVAL),
        id=f"monitor-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
    )


async def _state(h: Harness) -> BreakerState:
    return (await h.health.breaker(PRIMARY)).state


async def test_healed_primary_returns_within_two_intervals(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """Ten minutes down, then healed: closed and answering within 2 x 12 s, and it stays."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "server_error"}])
    for _ in range(6):  # real traffic trips the breaker
        await ts.call(env=ts_env)
    assert await _state(ts) is BreakerState.OPEN
    monitor = await _monitor(ts)
    for _ in range(10):  # ten minutes, in steps: one long skip can outlast the RPC timeout
        await ts_env.sleep(60)
    b = await ts.health.breaker(PRIMARY)
    assert b.trips >= 3, "failed half-open trials should have lengthened the open duration"
    assert b.state is BreakerState.OPEN and (b.open_until or 0) - b.since > 2 * INTERVAL
    await sim_admin.clear()
    healed_at = (await ts_env.get_current_time()).timestamp()
    closed_after = None
    for _ in range(16):
        await ts_env.sleep(1.5)
        if await _state(ts) is BreakerState.CLOSED:
            closed_after = (await ts_env.get_current_time()).timestamp() - healed_at
            break
    assert closed_after is not None and closed_after <= 2 * INTERVAL, closed_after
    assert (await ts.call(env=ts_env)).route == PRIMARY
    for _ in range(8):  # another minute and a half: no flapping back
        await ts_env.sleep(INTERVAL)
        assert (await ts.call(env=ts_env)).route == PRIMARY
        assert await _state(ts) is BreakerState.CLOSED
    await monitor.terminate()


async def test_failed_probes_while_open_do_not_extend_it(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """Probes run every interval while open, and failing ones leave open_until alone."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "server_error"}])
    for _ in range(6):
        await ts.call(env=ts_env)
    tripped = await ts.health.breaker(PRIMARY)
    monitor = await _monitor(ts)
    await ts_env.sleep(2 * INTERVAL + 1)  # two rounds inside the 30 s open duration
    probed = [a for a in await sim_admin.attempts() if a["endpoint"] == PRIMARY]
    b = await ts.health.breaker(PRIMARY)
    assert b.state is BreakerState.OPEN and b.open_until == tripped.open_until
    assert len(probed) >= 6 + 2  # the real calls, then one probe per round
    await monitor.terminate()


async def test_flapping_primary_never_closes(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """Up for at most two probes, then down: a good probe makes it half-open, the failed
    trial re-opens it; it never collects 3 good trials in a row, so never closes.

    Each window lasts 1.5 half-open intervals, so however the probes' phase falls against
    the toggles, no window holds a third probe (windows of exactly one interval let probes
    that land on a boundary see "up" three times in a row, depending on which of the
    toggle and the probe the server ran first)."""
    fast = ProbeSettings().half_open_interval()
    assert BreakerSettings().close_after_consecutive_successes >= 3  # probes are >= fast apart
    await sim_admin.set_faults(PRIMARY, [{"kind": "server_error"}])
    for _ in range(6):
        await ts.call(env=ts_env)
    monitor = await _monitor(ts)
    states = []
    for i in range(20):
        if i % 2:
            await sim_admin.set_faults(PRIMARY, [{"kind": "server_error"}])
        else:
            await sim_admin.clear()
        await ts_env.sleep(1.5 * fast)
        states.append(await _state(ts))
    assert BreakerState.CLOSED not in states
    assert BreakerState.HALF_OPEN in states or BreakerState.OPEN in states
    await monitor.terminate()


@pytest_asyncio.fixture
async def demo_ts(ts_env: WorkflowEnvironment, policy: PolicyConfig) -> AsyncIterator[Harness]:
    """A worker with the demo policy: probes every 3 s (timeout 5 s), TTFT budget 2 s."""
    h, workers = await make_harness(ts_env.client, policy)
    async with running(workers):
        yield h


async def test_a_brownout_is_probed_every_interval_and_left_within_two(
    ts_env: WorkflowEnvironment, demo_ts: Harness, sim_admin: SimAdmin
) -> None:
    """A probe into a slow first token gives up at the TTFT budget (not the 5 s
    probe timeout), rounds start an interval apart and the probe is stamped when sent, so
    an open primary is probed every round (before: every other one, 7-8 s apart) and a
    healed one is closed within 2 intervals."""
    interval = demo_ts.policy.probes.interval_s
    await sim_admin.set_faults(PRIMARY, [{"kind": "server_error"}])
    for _ in range(6):
        await demo_ts.call(env=ts_env)
    assert await _state(demo_ts) is BreakerState.OPEN
    await sim_admin.set_faults(PRIMARY, [{"kind": "slow_first_token", "seconds": 4}])
    await sim_admin.clear_attempts()
    monitor = await demo_ts.client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(routes=[PRIMARY], interval_s=interval),
        id=f"monitor-{uuid.uuid4().hex[:8]}",
        task_queue=demo_ts.task_queue,
    )
    await ts_env.sleep(4 * interval - 0.5)  # rounds at 0, 3, 6, 9 s
    probed = [a for a in await sim_admin.attempts() if a["endpoint"] == PRIMARY]
    assert len(probed) >= 4, len(probed)
    assert await _state(demo_ts) is BreakerState.OPEN
    await sim_admin.clear()
    healed_at = (await ts_env.get_current_time()).timestamp()
    closed_after = None
    for _ in range(16):
        await ts_env.sleep(0.5)
        if await _state(demo_ts) is BreakerState.CLOSED:
            closed_after = (await ts_env.get_current_time()).timestamp() - healed_at
            break
    assert closed_after is not None and closed_after <= 2 * interval, closed_after
    await monitor.terminate()
