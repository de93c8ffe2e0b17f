"""Specialists with agent tools inside the pipeline (dev server + simulator): each tool
call is a keyed ``run_tool`` logged in the run's saga, and a later failure (a failing
action) or a cancellation undoes it with the rest of the log."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError

from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    ActionSpec,
    ActionStatus,
    AgentToolSpec,
    EscalationState,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
    PipelineStatus,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.workflows.conftest import Harness

pytestmark = pytest.mark.devserver

TITLE = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
#: Both specialists may open a ticket while they work.
TOOLS = [
    AgentToolSpec(role=r, name="create_ticket", description="open a ticket", parameters=TITLE)
    for r in ("researcher", "analyst")
]
MESSAGE = ActionSpec(tool="post_message", args={"channel": "#ops"}, answer_arg="text")


def pipeline_input(*actions: ActionSpec) -> PipelineInput:
    return PipelineInput(
        task="Handle the checkout outage",
        options=PipelineOptions(
            revision_rounds=0, max_subtasks=2, agent_tools=TOOLS, actions=list(actions)
        ),
    )


async def _start(h: Harness, inp: PipelineInput):
    return await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        inp,
        id=f"tools-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )


async def test_specialists_tool_calls_stand_when_the_run_succeeds(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    result: PipelineResult = await (await _start(harness, pipeline_input())).result()
    log = result.compensation_log
    assert log is not None and log.entries, "no specialist called its tool"
    assert all(e.effect.step.endswith("/create_ticket") for e in log.entries)
    assert all(e.status.value == "applied" for e in log.entries)
    effects = await sim_admin.effects()
    assert sorted(e.key for e in effects) == sorted(e.effect.idempotency_key for e in log.entries)
    assert all(e.requests == 1 for e in effects)


async def test_failed_action_rolls_back_the_specialists_tickets(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    result: PipelineResult = await (await _start(harness, pipeline_input(MESSAGE))).result()
    assert [a.status for a in result.actions] == [ActionStatus.FAILED]
    undone = [e.effect.step for e in result.compensated]
    assert undone and all(s.endswith("/create_ticket") for s in undone)
    tools = [e.tool for e in await sim_admin.effects()]
    assert tools.count("close_ticket") == tools.count("create_ticket") == len(undone)


async def _wait_pending(handle) -> None:
    for _ in range(400):
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.escalation is EscalationState.PENDING:
            return
        await asyncio.sleep(0.05)
    pytest.fail("the pipeline never escalated its failed compensation")


async def test_cancelled_run_undoes_the_specialists_tickets(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Cancelled while its failed undo waits for a human: the shielded unwind closes every
    ticket once the tool works again, then the run ends cancelled."""
    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    await sim_admin.set_tool_faults("close_ticket", [{"status": 503}])
    handle = await _start(harness, pipeline_input(MESSAGE))
    await _wait_pending(handle)
    await sim_admin.clear_tool_faults("close_ticket")
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as err:
        await handle.result()
    assert isinstance(err.value.cause, CancelledError)
    tools = [e.tool for e in await sim_admin.effects()]
    assert tools.count("create_ticket") >= 1
    assert tools.count("close_ticket") == tools.count("create_ticket")


async def test_undo_that_still_fails_ends_the_run_compensation_failed(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Nobody answers the escalation (fail): every ticket is tried once more; the ones that
    still cannot close end the run as COMPENSATION_FAILED with the list, none dropped."""
    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    await sim_admin.set_tool_faults("close_ticket", [{"status": 503}])
    inp = pipeline_input(MESSAGE)
    inp.options.escalation_timeout_s = 1
    handle = await _start(harness, inp)
    with pytest.raises(WorkflowFailureError) as err:
        await handle.result()
    cause = err.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "COMPENSATION_FAILED"
    tickets = [e for e in await sim_admin.effects() if e.tool == "create_ticket"]
    failed = cause.details[0]
    assert len(failed) == len(tickets) >= 1
    assert {f["effect"]["idempotency_key"] for f in failed} == {t.key for t in tickets}
    assert isinstance(cause.cause, ApplicationError)
    assert cause.cause.type == "escalation_timed_out"


async def test_turn_limit_in_a_step_is_said_in_its_section(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    inp = pipeline_input()
    inp.options.max_tool_turns = 1
    result: PipelineResult = await (await _start(harness, inp)).result()
    specialists = [s for s in result.steps if s.output.role in ("researcher", "analyst")]
    assert specialists
    assert all(s.output.content.startswith("[turn_limit:") for s in specialists)
    assert await sim_admin.effects() == []


async def test_tool_call_applied_then_timed_out_is_rolled_back(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Every create_ticket applies, then hangs past the tool's timeout: each call is logged
    maybe_applied, and the failing action's rollback closes every ticket by its key."""
    hang = {"kind": "hang", "when": "after", "hold_s": 5}
    await sim_admin.set_tool_faults("create_ticket", [hang])
    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    inp = pipeline_input(MESSAGE)
    inp.options.agent_tools = [
        t.model_copy(update={"max_attempts": 1, "timeout_s": 0.5}) for t in TOOLS
    ]
    result: PipelineResult = await (await _start(harness, inp)).result()
    log = result.compensation_log
    assert log is not None and log.entries, "no specialist called its tool"
    assert all(e.maybe_applied and e.status.value == "compensated" for e in log.entries)
    effects = await sim_admin.effects()
    tickets = [e for e in effects if e.tool == "create_ticket"]
    closed = [e for e in effects if e.tool == "close_ticket"]
    assert tickets and sorted(e.object_id for e in closed) == sorted(e.object_id for e in tickets)
    assert {e.key for e in tickets} == {e.effect.idempotency_key for e in log.entries}
