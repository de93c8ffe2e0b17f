"""A degraded pipeline as an operator sees it: step table and summary in the Temporal UI,
saga and escalation events in its trace, and every dashboard series on the endpoint."""

from __future__ import annotations

import uuid

import httpx
import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.outcomes import RATE_BUDGET
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.telemetry import names
from agent_failover.testing.harness import Harness
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    ActionSpec,
    EscalationAction,
    EscalationDecision,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from agent_failover.workflows.search_attributes import pipeline_summary
from tests.activities.test_shadow import REFERENCE as SHADOW_REFERENCE
from tests.activities.test_shadow import _evaluate as shadow_evaluate
from tests.activities.test_shadow import _input as shadow_input
from tests.activities.test_shadow import _policy as shadow_policy
from tests.telemetry.conftest import Captured
from tests.telemetry.dashboard import (
    dashboard_series,
    expression_problems,
    rule_expressions,
    served_labels,
    served_series,
)
from tests.telemetry.test_record_budget_metrics import budgeted, refuse_a_call
from tests.telemetry.test_record_metrics_devserver import _sum, points
from tests.workflows.helpers import CallInput, ResilientCallWorkflow, drive_escalations

pytestmark = pytest.mark.devserver
PRIMARY = "anthropic-us-east"
TICKET = ActionSpec(tool="create_ticket", args={"title": "incident"}, answer_arg="body")
MESSAGE = ActionSpec(tool="post_message", args={"channel": "#ops"}, answer_arg="text")
#: Dashboard series no scenario here produces: a breaker closes again only through the
#: health monitor's probes (test_record_restoration_devserver.py runs that on the dev server).
NOT_IN_SCENARIO = {"failover_restoration_duration_seconds_bucket"}


async def _saga_pipeline(h: Harness, sim_admin: SimAdmin, task: str) -> PipelineResult:
    """Primary down, the second action fails and its undo fails too: the run escalates and
    an operator accepts the degraded state."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    await sim_admin.set_tool_faults("close_ticket", [{"status": 503}])
    handle = await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task=task, options=PipelineOptions(revision_rounds=0, actions=[TICKET, MESSAGE])
        ),
        id=f"pipe-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
        static_summary=pipeline_summary(task),
    )
    accept = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="carol")
    assert len(await drive_escalations(handle, [accept])) == 1
    result = await handle.result()
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    details = meta.current_details
    assert details.startswith(f"**worst tier {result.summary.worst_tier}**")
    assert "escalation resolved" in details and "phase done" in details
    for step in result.steps:
        assert f"| {step.step} | {step.output.tier} | {step.output.route} |" in details
    assert f"{PRIMARY} (overloaded)" in details
    desc = await handle.describe()
    assert await desc.static_summary() == pipeline_summary(task)
    return result


async def _shadow_regression(policy: PolicyConfig, sim_admin: SimAdmin) -> None:
    """The shadow_evaluate activity grades two wrong answers against a reference that is
    always right: two samples, their agreement, and the route marked QUALITY_REGRESSION."""
    await sim_admin.set_accuracy(SHADOW_REFERENCE, 1.0)
    cfg, store = shadow_policy(policy), MemoryHealthStore()
    for token in ("TOKEN-7", "TOKEN-8"):
        out = await shadow_evaluate(cfg, store, shadow_input("wrong", token=token))
    assert out.samples[0].regressed and out.samples[0].changed


async def test_degraded_pipeline_in_the_ui_trace_and_metrics(
    traced: Harness, sim_admin: SimAdmin, captured: Captured
) -> None:
    """The saga pipeline shows its step table and summary; its trace carries the
    compensation-failed and escalation events, the metrics count them."""
    await _saga_pipeline(traced, sim_admin, "Summarise the outage  \n for the on-call")
    spans = list(captured.spans.get_finished_spans())
    events = {e.name: dict(e.attributes) for s in spans for e in s.events}
    assert events[names.EV_COMPENSATION_FAILED]["failover.tool"] == "close_ticket"
    assert events[names.EV_ESCALATION_OPENED]["failover.step"] == "action#1/compensate"
    assert events[names.EV_ESCALATION_RESOLVED]["failover.detail"] == "accept_degraded"
    pts = points(captured)
    assert (
        _sum(pts[names.COMPENSATIONS], outcome="failed") == 1
    )  # one undo that failed (its retries are one activity)
    assert _sum(pts[names.ESCALATIONS], event="opened") == 1
    assert _sum(pts[names.ESCALATIONS], event="resolved") == 1


async def test_endpoint_serves_every_dashboard_and_alert_rule_series(
    traced: Harness, sim_admin: SimAdmin, captured: Captured
) -> None:
    """After a hedge race, the saga pipeline, a pipeline whose undo works, two disagreeing
    shadow evaluations (a quality regression), a call refused by a rate budget and an
    all-down call answered from the cache, the scrape endpoint serves every failover/GenAI
    series the dashboard queries; and every alerting rule of deploy/prometheus/alerts.yml
    names only series, labels and matched label values this real endpoint serves."""
    request = ChatRequest(messages=[Message(role="user", content="cache me")], max_tokens=60)
    call = CallInput(role="hedged", request=request)

    async def hedged_call() -> None:
        await traced.client.execute_workflow(
            ResilientCallWorkflow.run,
            call,
            id=f"call-{uuid.uuid4().hex[:10]}",
            task_queue=traced.task_queue,
            result_type=AgentOutput,
        )

    await sim_admin.set_faults(PRIMARY, [{"kind": "slow_first_token", "seconds": 1.5}])
    await hedged_call()
    await _saga_pipeline(traced, sim_admin, "Summarise the outage")
    await sim_admin.set_tool_faults("close_ticket", [])
    ok_undo = await traced.client.execute_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task="t", options=PipelineOptions(revision_rounds=0, actions=[TICKET, MESSAGE])
        ),
        id=f"pipe-{uuid.uuid4().hex[:10]}",
        task_queue=traced.task_queue,
        result_type=PipelineResult,
    )
    assert ok_undo.compensated
    await _shadow_regression(traced.policy, sim_admin)
    _, budgeted_acts = budgeted()
    assert (await refuse_a_call(budgeted_acts)).type == RATE_BUDGET
    for route in traced.policy.endpoints:
        await sim_admin.set_faults(route, [{"kind": "auth_error"}])
    await hedged_call()
    # A shared store losing its backend is counted where the link notices it.
    from agent_failover.telemetry import record

    record.store_outage("health")
    # Our own connection slots full takes a burst (one is provoked in
    # tests/activities/test_model_call_local_saturation.py): recorded as call_model does.
    record.local_saturation("analyst", PRIMARY, "core")
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{captured.telemetry.metrics_port}/metrics")).text
    wanted = {s for s in dashboard_series() if not s.startswith("temporal_")} - NOT_IN_SCENARIO
    missing = wanted - served_series(text)
    assert not missing, f"dashboard series the endpoint does not serve: {sorted(missing)}"
    served = served_labels(text)
    rules = rule_expressions()
    assert len(rules) >= 6
    problems = [p for name, expr in rules.items() for p in expression_problems(name, expr, served)]
    assert not problems, "alert rules read what the endpoint does not serve:\n" + "\n".join(
        problems
    )
