"""The agent pipeline end to end on the dev server: stages, visibility, escalation, input errors."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    EscalationAction,
    EscalationDecision,
    EscalationState,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from agent_failover.workflows.search_attributes import (
    DEGRADED,
    ESCALATION_STATE,
    FAILOVER_COUNT,
    WORST_TIER,
)
from tests.shipped import ALL_ENDPOINTS
from tests.workflows.conftest import Harness
from tests.workflows.helpers import drive_escalations

pytestmark = pytest.mark.devserver
ALL = ALL_ENDPOINTS


async def _start(h: Harness, task: str, **opts):
    return await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task=task, options=PipelineOptions(**opts)),
        id=f"pipe-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )


async def test_healthy_pipeline_runs_every_stage_on_tier0(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Planner → specialists → critic → synthesis, all full capability, attributes set."""
    handle = await _start(harness, "Compare two queue designs")
    result: PipelineResult = await handle.result()
    names = [s.step for s in result.steps]
    assert names[0] == "planner" and names[-1] == "synthesis"
    assert any(n.startswith("critic") for n in names)
    assert len(result.plan) >= 1 and len(result.sections) == len(result.plan)
    assert not result.degraded and result.summary.worst_tier == 0
    assert all(s.output.tier == 0 for s in result.steps)
    assert result.answer.strip()
    sa = (await handle.describe()).typed_search_attributes
    assert sa.get(DEGRADED) is False and sa.get(WORST_TIER) == 0
    assert sa.get(FAILOVER_COUNT) == 0 and sa.get(ESCALATION_STATE) == "none"


async def test_outage_pipeline_is_findable_by_search_attributes(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Claude (everywhere) and OpenAI down: steps land on tier 2; FailoverCount/WorstTier
    let the UI filter it."""
    for ep in ("anthropic-us-east", "anthropic-eu-west", "bedrock-us-west-2",
               "vertex-europe-west1", "openai-us"):  # fmt: skip
        await sim_admin.set_faults(ep, [{"kind": "overloaded"}])
    handle = await _start(harness, "Assess a region evacuation")
    result: PipelineResult = await handle.result()
    assert result.summary.worst_tier == 2 and result.degraded
    assert {s.output.route for s in result.steps} <= {"cheap-mini", "gemini-flash"}
    assert "Provenance" in result.answer
    sa = (await handle.describe()).typed_search_attributes
    assert sa.get(FAILOVER_COUNT) == len(result.steps)
    assert sa.get(WORST_TIER) == 2 and sa.get(DEGRADED) is True
    # the UI's filter is a visibility query; the dev server answers it from SQLite
    for _ in range(50):
        ids = [
            w.id
            async for w in harness.client.list_workflows(
                f"Degraded = true AND WorstTier >= 2 AND WorkflowId = '{handle.id}'"
            )
        ]
        if ids:
            break
        await asyncio.sleep(0.1)
    assert ids == [handle.id]


async def test_escalation_pauses_with_state_and_accepts_human_output(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """All down: the pipeline pauses with its state serialized; a human answer is used."""
    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    handle = await _start(harness, "Plan a failover drill", revision_rounds=0)
    human = EscalationDecision(
        action=EscalationAction.PROVIDE_OUTPUT,
        output=(
            '{"subtasks": [{"id": "h1", "role": "researcher", "instruction": "check runbooks"}]}'
        ),
        operator="alice",
    )
    accept = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="alice")
    seen = await drive_escalations(handle, [human, accept, accept])
    result: PipelineResult = await handle.result()
    assert seen, "the pipeline never reported a pending escalation"
    pending = seen[0].pending_escalation
    assert pending is not None and pending.step == "planner"
    assert pending.failover_history == {} and "specialists" in pending.pending_steps
    planner = result.steps[0].output
    assert planner.route == "human" and "HUMAN_PROVIDED" in [c.value for c in planner.reason_codes]
    # the human's JSON plan is parsed and used (not replaced by the default plan)
    assert [p["id"] for p in result.plan] == ["h1"]
    assert result.escalation is EscalationState.RESOLVED


async def test_abort_fails_the_pipeline_with_a_clear_error(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """An operator abort ends the run with a non-retryable, named error."""
    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    handle = await _start(harness, "Plan a failover drill")
    abort = EscalationDecision(action=EscalationAction.ABORT, operator="bob", note="drill over")
    with pytest.raises(WorkflowFailureError) as info:
        await drive_escalations(handle, [abort])
        await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "aborted_by_operator"
    assert "bob" in str(cause)


async def test_invalid_input_fails_at_once_naming_the_field(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A blank task is rejected by the workflow with a non-retryable error naming 'task'."""
    with pytest.raises(WorkflowFailureError) as info:
        await harness.client.execute_workflow(
            "AgentPipelineWorkflow",
            {"task": "   ", "options": {"max_subtasks": 99}},
            id=f"pipe-{uuid.uuid4().hex[:10]}",
            task_queue=harness.task_queue,
        )
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "invalid_pipeline_input"
    assert "task" in str(cause) and "options.max_subtasks" in str(cause)
    assert await sim_admin.attempts() == []
