"""Timers without real waiting: probe intervals, open → half-open → closed, continue-as-new,
operator overrides and escalation timeouts, on the time-skipping test server.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest_asyncio
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import BreakerState
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    EscalationState,
    ForceRouteSignal,
    MonitorInput,
    MonitorTable,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
)
from agent_failover.workflows.monitor import HealthMonitorWorkflow
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.workflows.conftest import Harness, make_harness, running

PRIMARY = "anthropic-us-east"
ALL = [
    "anthropic-us-east", "anthropic-eu-west", "bedrock-us-west-2", "vertex-europe-west1",
    "openai-us", "cheap-mini", "gemini-flash",
]  # fmt: skip


@pytest_asyncio.fixture
async def ts_harness(ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin):
    h, workers = await make_harness(ts_env.client, policy)
    async with running(workers):
        yield h


async def _start_monitor(h: Harness, **kw) -> WorkflowHandle:
    return await h.client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(**kw),
        id=f"monitor-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
    )


async def _probes(admin: SimAdmin, route: str) -> int:
    return Counter(a["endpoint"] for a in await admin.attempts())[route]


async def test_probes_run_on_the_interval(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """Three intervals of 12 s later, the route has been probed four times (t=0,12,24,36)."""
    handle = await _start_monitor(ts_harness, routes=[PRIMARY], interval_s=12)
    await ts_env.sleep(37)
    table: MonitorTable = await handle.query(HealthMonitorWorkflow.health, result_type=MonitorTable)
    assert table.rounds == 4
    assert await _probes(sim_admin, PRIMARY) == 4
    assert table.results[PRIMARY].ok
    await handle.terminate()


async def test_open_breaker_goes_half_open_and_closes_after_three_good_probes(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """A 529 with Retry-After opens the breaker; no probe while open; 3 good trials close it."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded", "retry_after": 30}])
    handle = await _start_monitor(ts_harness, routes=[PRIMARY], interval_s=12)
    await ts_env.sleep(1)
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.OPEN
    await sim_admin.clear()
    await ts_env.sleep(24)  # t≈25: probes at 12 and 24 must be skipped (still open)
    assert await _probes(sim_admin, PRIMARY) == 1, "an open route must not be probed"
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.OPEN
    await ts_env.sleep(12)  # t≈37: first trial
    b = await ts_harness.health.breaker(PRIMARY)
    assert b.state is BreakerState.HALF_OPEN
    await ts_env.sleep(12)  # t≈49: second trial: still half-open (needs 3)
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.HALF_OPEN
    await ts_env.sleep(12)  # t≈61: third good trial closes it
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.CLOSED
    assert await _probes(sim_admin, PRIMARY) == 4
    await handle.terminate()


async def test_monitor_continues_as_new_and_keeps_its_state(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """After iterations_per_run rounds the monitor continues-as-new, carrying its table."""
    handle = await _start_monitor(ts_harness, routes=[PRIMARY], interval_s=5, iterations_per_run=2)
    await ts_env.sleep(26)
    desc = await handle.describe()
    latest = ts_harness.client.get_workflow_handle(handle.id)
    table: MonitorTable = await latest.query(HealthMonitorWorkflow.health, result_type=MonitorTable)
    assert desc.run_id != handle.first_execution_run_id or desc.run_id != handle.result_run_id
    assert table.rounds >= 5
    assert PRIMARY in table.results
    await latest.terminate()


async def test_force_open_and_release_through_signals(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """Operator signals force a route open (no probes reach it) and release it."""
    handle = await _start_monitor(ts_harness, routes=[PRIMARY], interval_s=10, paused=True)
    await handle.signal(
        HealthMonitorWorkflow.force_route,
        ForceRouteSignal(route=PRIMARY, state=BreakerState.FORCED_OPEN),
    )
    await ts_env.sleep(1)
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.FORCED_OPEN
    await handle.signal(HealthMonitorWorkflow.resume)
    await ts_env.sleep(21)
    assert await _probes(sim_admin, PRIMARY) == 0
    await handle.signal(HealthMonitorWorkflow.force_route, ForceRouteSignal(route=PRIMARY))
    await ts_env.sleep(11)
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.CLOSED
    assert await _probes(sim_admin, PRIMARY) >= 1
    await handle.terminate()


async def test_escalation_times_out_and_keeps_the_degraded_answer(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """Everything down: the critical planner is static, the pipeline waits for a human,
    and after the escalation timeout (skipped, not waited) it finishes degraded."""
    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    result: PipelineResult = await ts_harness.client.execute_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task="plan an outage drill",
            options=PipelineOptions(escalation_timeout_s=3600, revision_rounds=0),
        ),
        id=f"pipe-{uuid.uuid4().hex[:8]}",
        task_queue=ts_harness.task_queue,
        result_type=PipelineResult,
    )
    assert result.escalation is EscalationState.TIMED_OUT
    assert result.degraded
    assert result.steps[0].step == "planner"
    assert "ESCALATED" in [c.value for c in result.steps[0].output.reason_codes]


async def test_hedge_timer_starts_the_standby_while_the_primary_hangs(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """The hedge delay is a workflow timer: the standby starts while the primary still hangs."""
    from agent_failover.providers.models import ChatRequest, Message
    from agent_failover.resilience.contracts import AgentOutput, ReasonCode
    from tests.workflows.helpers import CallInput, ResilientCallWorkflow

    await sim_admin.set_faults(PRIMARY, [{"kind": "hang"}])
    out: AgentOutput = await ts_harness.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(
            role="hedged",
            request=ChatRequest(messages=[Message(role="user", content="hedge under test")]),
        ),
        id=f"hedge-{uuid.uuid4().hex[:8]}",
        task_queue=ts_harness.task_queue,
        result_type=AgentOutput,
    )
    assert ReasonCode.HEDGED in out.reason_codes and out.route != PRIMARY
    primary = next(a for a in out.attempts if a.route == PRIMARY)
    hedge = next(a for a in out.attempts if a.route == out.route)
    assert primary.outcome == "cancelled" and hedge.hedge
    assert hedge.started_at - primary.started_at >= 0.2  # the configured 200 ms delay
