"""Timers without real waiting: probe intervals, open → half-open → closed, continue-as-new,
operator overrides and escalation timeouts, on the time-skipping test server.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
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
    """A 529 with Retry-After 30 s opens the breaker; no probe before the Retry-After; the
    first good probe after it makes it half-open, and two faster probes (every 3 s) close it."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded", "retry_after": 30}])
    handle = await _start_monitor(ts_harness, routes=[PRIMARY], interval_s=12)
    await ts_env.sleep(1)
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.OPEN
    await sim_admin.clear()
    await ts_env.sleep(24)  # t≈25: probes at 12 and 24 are skipped (Retry-After not over)
    assert await _probes(sim_admin, PRIMARY) == 1, "probed against the provider's Retry-After"
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.OPEN
    await ts_env.sleep(12)  # t≈37: the round at 36 probes: the first good trial
    b = await ts_harness.health.breaker(PRIMARY)
    assert b.state is BreakerState.HALF_OPEN
    await ts_env.sleep(6)  # t≈43: half-open rounds every 12 / 4 = 3 s: trials 2 and 3
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


async def test_force_open_and_release_through_the_override_update(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """Operator overrides force a route open (no probes reach it) and release it."""
    handle = await _start_monitor(ts_harness, routes=[PRIMARY], interval_s=10, paused=True)
    await handle.execute_update(
        HealthMonitorWorkflow.override_route,
        ForceRouteSignal(route=PRIMARY, state=BreakerState.FORCED_OPEN),
    )
    await ts_env.sleep(1)
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.FORCED_OPEN
    await handle.signal(HealthMonitorWorkflow.resume)
    await ts_env.sleep(21)
    assert await _probes(sim_admin, PRIMARY) == 0
    await handle.execute_update(
        HealthMonitorWorkflow.override_route, ForceRouteSignal(route=PRIMARY)
    )
    await ts_env.sleep(11)
    assert (await ts_harness.health.breaker(PRIMARY)).state is BreakerState.CLOSED
    assert await _probes(sim_admin, PRIMARY) >= 1
    await handle.terminate()


async def _pipeline(h: Harness, **opts) -> WorkflowHandle:
    return await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="plan an outage drill", options=PipelineOptions(**opts)),
        id=f"pipe-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )


async def _workflow_seconds(handle: WorkflowHandle) -> float:
    """Workflow time from start to close (time-skipping: the timers' time, not waited)."""
    desc = await handle.describe()
    assert desc.close_time is not None
    return (desc.close_time - desc.start_time).total_seconds()


async def test_unanswered_escalation_fails_the_run_with_the_reason(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """Everything down, nobody answers: after one timeout (skipped, not waited) the run fails
    with escalation_timed_out naming the blocked step; no guessed answer is returned."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    handle = await _pipeline(ts_harness, escalation_timeout_s=3600, revision_rounds=1)
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "escalation_timed_out"
    assert "planner" in str(cause) and "static fallback" in str(cause)
    assert [b["step"] for b in cause.details[0]["blocked_steps"]] == ["planner"]
    assert 3600 <= await _workflow_seconds(handle) < 2 * 3600


async def test_one_escalation_covers_every_blocked_critical_step(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """accept_degraded on timeout: planner, critic and synthesis are all blocked, but the run
    waits out one timeout, not one per step; the static critic leaves the work unreviewed."""
    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    handle = await _pipeline(
        ts_harness,
        escalation_timeout_s=3600,
        escalation_timeout_action="accept_degraded",
        revision_rounds=1,
    )
    result: PipelineResult = await handle.result()
    assert result.escalation is EscalationState.TIMED_OUT
    blocked = {"planner", "critic#1", "synthesis"}
    for s in result.steps:
        codes = {c.value for c in s.output.reason_codes}
        if s.step in blocked:
            assert {"ESCALATED", "ACCEPTED_DEGRADED", "STATIC_FALLBACK"} <= codes, s.step
    assert {s.step for s in result.steps} >= blocked
    assert result.critic_verdict == "unreviewed" and "critic#2" not in {
        s.step for s in result.steps
    }
    assert "not reviewed" in result.answer
    assert 3600 <= await _workflow_seconds(handle) < 2 * 3600


async def test_low_confidence_critical_step_escalates(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """A critical planner answering at tier 2 (confidence 0.8) below its min_confidence 0.9
    escalates although it was not static; only that step is marked."""
    planner = policy.role("planner").model_copy(update={"min_confidence": 0.9})
    strict = policy.model_copy(update={"roles": {**policy.roles, "planner": planner}})
    h, workers = await make_harness(ts_env.client, strict)
    roster = planner.roster
    for ep in (*roster.tier0, *roster.tier1):  # only the tier-2 routes answer
        await sim_admin.set_faults(ep, [{"kind": "overloaded"}])
    async with running(workers):
        handle = await _pipeline(
            h,
            escalation_timeout_s=600,
            escalation_timeout_action="accept_degraded",
            revision_rounds=0,
        )
        result: PipelineResult = await handle.result()
    planner_out = result.steps[0].output
    assert result.steps[0].step == "planner" and planner_out.tier == 2
    assert planner_out.confidence < 0.9
    assert {"ESCALATED", "ACCEPTED_DEGRADED"} <= {c.value for c in planner_out.reason_codes}
    others = [
        s for s in result.steps[1:] if "ESCALATED" in {c.value for c in s.output.reason_codes}
    ]
    assert others == [] and result.escalation is EscalationState.TIMED_OUT


async def test_hedge_timer_starts_the_standby_while_the_primary_hangs(
    ts_env: WorkflowEnvironment, ts_harness: Harness, sim_admin: SimAdmin
) -> None:
    """The hedge delay is a workflow timer: the standby starts while the primary still hangs."""
    from agent_failover.resilience.contracts import AgentOutput, ReasonCode
    from agent_failover.resilience.models import ChatRequest, Message
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
