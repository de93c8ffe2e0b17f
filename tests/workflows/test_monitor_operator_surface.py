"""What operators touch, on the dev server: overrides and decisions are updates whose
validators refuse what does not apply (and nothing an operator sends can fail the
monitor); the monitor is restarted when it ends; the history query and the Temporal UI
event list read without opening payloads; a hedge loser's cancellation is not a warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import datetime
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.logs import BENIGN_MESSAGES
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput, BreakerState
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.supervisor import keep_monitor_running
from agent_failover.testing.harness import make_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    EscalationAction,
    EscalationDecision,
    EscalationState,
    EscalationTimeoutAction,
    ForceRouteSignal,
    MonitorInput,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
    PipelineStatus,
    RouteOverride,
    StepHistory,
)
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.chaos.helpers import eventually
from tests.workflows.conftest import Harness
from tests.workflows.helpers import CallInput, ResilientCallWorkflow

pytestmark = pytest.mark.devserver
#: Every route of the demo policy (taking them all down forces the static fallback).
LOCAL_ACTIVITY = "core_local_activity"  # the marker a local activity leaves in history
ALL = sorted(load_policy(DEFAULT_POLICY_PATH, env={"SIM_URL": "http://sim.invalid"}).endpoints)


async def _monitor(h: Harness) -> WorkflowHandle:
    return await h.client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(routes=ALL, interval_s=5, paused=True),
        id=f"monitor-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
    )


async def _running(handle: WorkflowHandle) -> bool:
    try:
        return (await handle.describe()).status is WorkflowExecutionStatus.RUNNING
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return False  # not started yet
        raise


async def test_override_update_refuses_unknown_route_and_applies_known(harness: Harness) -> None:
    """Unknown route: refused with the known names, monitor untouched. Known: applied."""
    handle = await _monitor(harness)
    try:
        with pytest.raises(WorkflowUpdateFailedError) as exc:
            await handle.execute_update(
                HealthMonitorWorkflow.override_route, ForceRouteSignal(route="gpt-x")
            )
        known = ", ".join(ALL)
        assert f"unknown route 'gpt-x'; known routes: {known}" in str(exc.value.cause)
        done = await handle.execute_update(
            HealthMonitorWorkflow.override_route,
            ForceRouteSignal(route="openai-us", state=BreakerState.FORCED_OPEN),
            result_type=RouteOverride,
        )
        assert done.changed and done.to_state is BreakerState.FORCED_OPEN
        assert (await harness.health.breaker("openai-us")).state is BreakerState.FORCED_OPEN
        assert await _running(handle)
    finally:
        await handle.terminate()


async def test_monitor_is_restarted_when_it_ends(harness: Harness) -> None:
    """The worker's supervisor starts the monitor, and starts it again once terminated."""
    stop = asyncio.Event()
    supervisor = asyncio.create_task(
        keep_monitor_running(
            harness.client, harness.policy, task_queue=harness.task_queue, stop=stop
        )
    )
    handle = harness.client.get_workflow_handle(monitor_workflow_id(harness.task_queue))
    try:
        await eventually(lambda: _running(handle), timeout_s=20)
        first = (await handle.describe()).run_id
        await handle.terminate("operator mistake")

        async def restarted() -> bool:
            d = await handle.describe()
            return d.run_id != first and d.status is WorkflowExecutionStatus.RUNNING

        await eventually(restarted, timeout_s=20)
    finally:
        stop.set()
        await asyncio.wait_for(supervisor, 15)  # returns by itself, no call cut short
        await harness.client.get_workflow_handle(handle.id).terminate()


async def _pending(handle: WorkflowHandle) -> bool:
    st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
    return st.escalation is EscalationState.PENDING


async def test_resolve_update_refuses_what_does_not_apply(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """provide_output without text is refused by the validator, not silently ignored;
    a decision that applies is accepted with the step it applies to."""
    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    handle = await harness.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="needs a human", options=PipelineOptions(revision_rounds=0)),
        id=f"esc-{uuid.uuid4().hex[:8]}",
        task_queue=harness.task_queue,
    )
    try:
        await eventually(lambda: _pending(handle), timeout_s=30)
        with pytest.raises(WorkflowUpdateFailedError) as exc:
            await handle.execute_update(
                AgentPipelineWorkflow.resolve,
                EscalationDecision(action=EscalationAction.PROVIDE_OUTPUT, output="  "),
            )
        assert "provide_output needs the output text" in str(exc.value.cause)
        receipt = await handle.execute_update(
            AgentPipelineWorkflow.resolve,
            EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="t"),
        )
        assert receipt.step == "planner" and receipt.action is EscalationAction.ACCEPT_DEGRADED
    finally:
        await handle.terminate()


async def test_history_query_and_event_summaries(harness: Harness, sim_admin: SimAdmin) -> None:
    """failover_history: ISO timestamps and reason codes per step. History: every
    activity, local activity and timer carries a summary (the UI reads without payloads)."""
    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    wid = f"sum-{uuid.uuid4().hex[:8]}"
    await harness.client.execute_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task="everything down",
            options=PipelineOptions(
                revision_rounds=0,
                escalation_timeout_s=1,
                escalation_timeout_action=EscalationTimeoutAction.ACCEPT_DEGRADED,
            ),
        ),
        id=wid,
        task_queue=harness.task_queue,
        result_type=PipelineResult,
    )
    handle = harness.client.get_workflow_handle(wid)
    steps = await handle.query(
        AgentPipelineWorkflow.failover_history, result_type=list[StepHistory]
    )
    assert steps and all("STATIC_FALLBACK" in s.reason_codes for s in steps if s.tier == 3)
    for a in (a for s in steps for a in s.attempts):
        assert datetime.fromisoformat(a.started_at).utcoffset().total_seconds() == 0
    summaries = await _summaries(handle)
    kinds = {k for k, _ in summaries}
    assert {"ActivityTaskScheduled", "MarkerRecorded", "TimerStarted"} <= kinds
    assert [k for k, s in summaries if not s] == [], summaries
    assert any(s.startswith("escalation round 1: wait 1s for a human") for _, s in summaries)
    assert any("cached answer after every live route failed" in s for _, s in summaries)


async def _summaries(handle: WorkflowHandle) -> list[tuple[str, str]]:
    wanted = {
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "ActivityTaskScheduled",
        EventType.EVENT_TYPE_MARKER_RECORDED: "MarkerRecorded",  # local activities
        EventType.EVENT_TYPE_TIMER_STARTED: "TimerStarted",
    }
    out = []
    for e in (await handle.fetch_history()).events:
        marker = e.marker_recorded_event_attributes.marker_name
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and marker != LOCAL_ACTIVITY:
            continue  # workflow.patched markers are SDK bookkeeping, not work the UI lists
        if _is_role_context(e):
            # A call's route-health read carries no summary (a payload per call, left out
            # for the CPU floor); the UI names it by its type, and the attempts say what
            # was substituted.
            continue
        if e.event_type in wanted:
            summary = ""
            if e.user_metadata.HasField("summary"):
                summary = pydantic_data_converter.payload_converter.from_payload(
                    e.user_metadata.summary, str
                )
            out.append((wanted[e.event_type], summary))
    return out


def _is_role_context(event: Any) -> bool:
    """A ``role_context`` local activity's marker (its type is in the marker's data)."""
    if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
        return False
    data = event.marker_recorded_event_attributes.details.get("data")
    if data is None or not data.payloads:
        return False
    return json.loads(data.payloads[0].data).get("activity_type") == "role_context"


async def test_hedge_loser_logs_nothing_above_debug(
    harness: Harness, sim_admin: SimAdmin, caplog: pytest.LogCaptureFixture
) -> None:
    """The loser of a hedge race, still running when the call returns, ends without a
    WARNING traceback or an ERROR line: its failure is an expected, benign one."""
    await sim_admin.set_faults("anthropic-us-east", [{"kind": "latency", "seconds": 2.5}])
    await _race_and_check_the_loser(harness, caplog)


async def test_loser_that_outlives_its_run_logs_nothing_above_debug(
    dev_env: WorkflowEnvironment,
    policy: PolicyConfig,
    sim_admin: SimAdmin,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A loser whose run has completed before its next heartbeat learns of it as "not
    found", not as a cancel request: it still ends as a benign failure, not a WARNING."""
    hedged = policy.role("hedged")
    roles = {**policy.roles, "hedged": hedged.model_copy(update={"ttft_budget_ms": 8000.0})}
    slow_loser = policy.model_copy(update={"roles": roles})
    harness, workers = await make_harness(dev_env.client, slow_loser)
    await sim_admin.set_faults("anthropic-us-east", [{"kind": "latency", "seconds": 9.0}])
    async with running(workers):
        await _race_and_check_the_loser(harness, caplog)


async def _race_and_check_the_loser(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("temporalio.activity", "temporalio.workflow", "agent_failover"):
        caplog.set_level(logging.DEBUG, logger=name)  # whatever an earlier CLI test set
    out: AgentOutput = await harness.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(
            role="hedged", request=ChatRequest(messages=[Message(role="user", content="race")])
        ),
        id=f"hedge-{uuid.uuid4().hex[:8]}",
        task_queue=harness.task_queue,
        result_type=AgentOutput,
    )
    assert [a.outcome for a in out.attempts if a.route == "anthropic-us-east"] == ["cancelled"]

    async def loser_done() -> bool:
        ends = ("Completing activity as failed", "Completing as cancelled")
        return any(r.getMessage().startswith(ends) for r in caplog.records)

    await eventually(loser_done, timeout_s=15)
    loud = [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING
        and r.name.startswith(("temporalio", "agent_failover"))
        and "breaker" not in r.getMessage()
        # The core's "Activity not found on completion" (a loser that completed after its
        # run closed) reaches here only when an earlier test in this process forwarded the
        # core's logs; the worker's logging demotes it to DEBUG (agent_failover.logs).
        and not any(m in r.getMessage() for m in BENIGN_MESSAGES)
    ]
    assert loud == [], [(r.name, r.levelname, r.getMessage()[:120]) for r in loud]
