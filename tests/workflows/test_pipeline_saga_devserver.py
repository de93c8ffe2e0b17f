"""The pipeline's side effects as a saga on the dev server: exactly once, compensated in
reverse, escalated."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    ActionSpec,
    ActionStatus,
    EscalationAction,
    EscalationDecision,
    EscalationState,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
    PipelineStatus,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.workflows.conftest import Harness
from tests.workflows.helpers import drive_escalations

pytestmark = pytest.mark.devserver

TICKET = ActionSpec(tool="create_ticket", args={"title": "incident"}, answer_arg="body")
MESSAGE = ActionSpec(tool="post_message", args={"channel": "#ops"}, answer_arg="text")
BUDGET = ActionSpec(tool="reserve_budget", args={"amount": 5})


def _input(*actions: ActionSpec, **opts) -> PipelineInput:
    return PipelineInput(
        task="Summarise the outage",
        options=PipelineOptions(revision_rounds=0, actions=list(actions), **opts),
    )


async def _start(h: Harness, inp: PipelineInput, wid: str | None = None):
    return await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        inp,
        id=wid or f"saga-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )


async def test_action_retried_after_a_lost_answer_is_applied_once(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """create_ticket applies, then answers 500; Temporal retries with the same key: one effect."""
    await sim_admin.set_tool_faults("create_ticket", [{"status": 500, "when": "after", "times": 1}])
    result: PipelineResult = await (await _start(harness, _input(TICKET, MESSAGE))).result()
    assert [a.status for a in result.actions] == [ActionStatus.APPLIED] * 2
    assert result.actions[0].replayed and not result.actions[1].replayed
    assert result.compensated == []
    effects = await sim_admin.effects()
    assert [e.tool for e in effects] == ["create_ticket", "post_message"]
    assert [e.key for e in effects] == [a.idempotency_key for a in result.actions]
    assert effects[0].requests == 2 and effects[0].args["body"] == result.answer
    assert (await sim_admin.tool_calls())["create_ticket"] == 2


async def test_hard_failure_of_second_action_compensates_the_first(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """post_message exhausts its retries: the ticket is closed, the third action never runs.

    Retries exhausted on a 5xx is ambiguous: the message is logged ``maybe_applied`` and
    its undo (by key) finds nothing — ``compensated (nothing applied)``."""
    await sim_admin.set_tool_faults("post_message", [{"status": 500}])
    failing = MESSAGE.model_copy(update={"max_attempts": 2})
    result: PipelineResult = await (await _start(harness, _input(TICKET, failing, BUDGET))).result()
    assert [a.status for a in result.actions] == [
        ActionStatus.COMPENSATED,
        ActionStatus.FAILED,
        ActionStatus.SKIPPED,
    ]
    assert "tool_server_error" in (result.actions[1].error or "")
    assert [e.effect.step for e in result.compensated] == ["action#2", "action#1"]
    assert [e.label() for e in result.compensated] == [
        "compensated (nothing applied)",
        "compensated",
    ]
    effects = await sim_admin.effects()
    assert [e.tool for e in effects] == ["create_ticket", "close_ticket"]
    assert effects[1].args["id"] == effects[0].object_id
    calls = await sim_admin.tool_calls()
    assert calls["post_message"] == 2 and "reserve_budget" not in calls


async def test_compensations_run_in_reverse_order(harness: Harness, sim_admin: SimAdmin) -> None:
    """A rejected (4xx, not retried) third action undoes the second, then the first."""
    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    result: PipelineResult = await (await _start(harness, _input(BUDGET, TICKET, MESSAGE))).result()
    assert [e.tool for e in await sim_admin.effects()] == [
        "reserve_budget",
        "create_ticket",
        "close_ticket",
        "release_budget",
    ]
    assert [e.effect.step for e in result.compensated] == ["action#2", "action#1"]
    assert (await sim_admin.tool_calls())["post_message"] == 1
    assert result.compensation_log is not None
    assert result.compensation_log.to_compensate() == []


async def test_failing_compensation_escalates_and_accept_degraded_leaves_it(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """close_ticket keeps failing: the pipeline pauses with its log; accepting leaves the ticket."""
    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    await sim_admin.set_tool_faults("close_ticket", [{"status": 503}])
    handle = await _start(harness, _input(TICKET, MESSAGE))
    accept = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="carol")
    seen = await drive_escalations(handle, [accept])
    result: PipelineResult = await handle.result()
    assert len(seen) == 1
    pending = seen[0].pending_escalation
    assert pending is not None and pending.role == "saga"
    assert pending.step == "action#1/compensate" and "close_ticket" in pending.reason
    assert pending.compensation_log is not None
    assert [e.status.value for e in pending.compensation_log.entries] == ["failed"]
    assert seen[0].compensation_log is not None
    assert [a.status for a in result.actions] == [ActionStatus.LEFT, ActionStatus.FAILED]
    assert result.compensated == [] and result.escalation is EscalationState.RESOLVED
    assert (await sim_admin.tool_calls())["close_ticket"] == 3
    assert [e.tool for e in await sim_admin.effects()] == ["create_ticket"]


async def test_retry_after_the_tool_recovers_completes_the_compensation(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """The operator fixes the tool and answers retry: the undo runs again and completes."""
    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    await sim_admin.set_tool_faults("close_ticket", [{"status": 503}])
    handle = await _start(harness, _input(TICKET, MESSAGE))
    result_task = asyncio.create_task(handle.result())
    while True:
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.escalation is EscalationState.PENDING:
            break
        await asyncio.wait([result_task], timeout=0.1)
        assert not result_task.done(), "the pipeline ended without escalating"
    await sim_admin.clear_tool_faults("close_ticket")
    await handle.execute_update(
        AgentPipelineWorkflow.resolve,
        EscalationDecision(action=EscalationAction.RETRY, operator="carol"),
    )
    result: PipelineResult = await result_task
    assert [a.status for a in result.actions] == [ActionStatus.COMPENSATED, ActionStatus.FAILED]
    assert [e.tool for e in await sim_admin.effects()] == ["create_ticket", "close_ticket"]


async def test_rerun_with_the_same_workflow_id_does_not_duplicate_effects(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Terminated mid-actions, restarted under the same id, run once more: one effect per key."""
    await sim_admin.set_tool_faults("post_message", [{"kind": "hang", "hold_s": 30}])
    inp = _input(TICKET, MESSAGE.model_copy(update={"timeout_s": 1.0}))
    wid = f"saga-{uuid.uuid4().hex[:10]}"
    first = await _start(harness, inp, wid)
    for _ in range(200):
        calls = await sim_admin.tool_calls()
        if calls.get("post_message"):
            break
        await asyncio.sleep(0.05)
    assert [e.tool for e in await sim_admin.effects()] == ["create_ticket"]
    await first.terminate("operator restart")
    await sim_admin.clear_tool_faults()
    second: PipelineResult = await (await _start(harness, inp, wid)).result()
    third: PipelineResult = await (await _start(harness, inp, wid)).result()
    assert [a.idempotency_key for a in second.actions] == [a.idempotency_key for a in third.actions]
    assert second.actions[0].replayed and all(a.replayed for a in third.actions)
    effects = await sim_admin.effects()
    assert sorted(e.tool for e in effects) == ["create_ticket", "post_message"]
    assert {e.key for e in effects} == {a.idempotency_key for a in third.actions}


async def test_operator_abort_compensates_every_applied_effect(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Abort during a failed undo: the run fails, but only after undoing what it applied."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    await sim_admin.set_tool_faults("close_ticket", [{"status": 503, "times": 3}])
    handle = await _start(harness, _input(BUDGET, TICKET, MESSAGE))
    abort = EscalationDecision(action=EscalationAction.ABORT, operator="dana", note="stop")
    with pytest.raises(WorkflowFailureError) as info:
        await drive_escalations(handle, [abort])
        await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "aborted_by_operator"
    assert "2 side effect(s) compensated" in str(cause)
    tools = [e.tool for e in await sim_admin.effects()]
    assert tools == ["reserve_budget", "create_ticket", "close_ticket", "release_budget"]


async def test_escalation_timeout_abort_compensates_then_fails(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Nobody answers and the timeout action is abort: undo the rest, then fail with why."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    await sim_admin.set_tool_faults("post_message", [{"status": 400}])
    await sim_admin.set_tool_faults("close_ticket", [{"status": 503, "times": 3}])
    inp = _input(
        BUDGET, TICKET, MESSAGE, escalation_timeout_s=1.0, escalation_timeout_action="abort"
    )
    with pytest.raises(WorkflowFailureError) as info:
        await (await _start(harness, inp)).result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "escalation_timed_out"
    assert "action#2/compensate" in str(cause) and "2 side effect(s) compensated" in str(cause)
    assert cause.details[0]["action"] == "abort"
    tools = [e.tool for e in await sim_admin.effects()]
    assert tools == ["reserve_budget", "create_ticket", "close_ticket", "release_budget"]


async def test_action_applied_then_timed_out_is_compensated_by_its_key(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """post_message applies, then never answers (tool timeout, attempts exhausted): the
    message is logged maybe_applied and deleted by its idempotency key, then the ticket."""
    hang = {"kind": "hang", "when": "after", "hold_s": 5}
    await sim_admin.set_tool_faults("post_message", [hang])
    failing = MESSAGE.model_copy(update={"max_attempts": 1, "timeout_s": 0.5})
    result: PipelineResult = await (await _start(harness, _input(TICKET, failing))).result()
    assert [a.status for a in result.actions] == [ActionStatus.COMPENSATED, ActionStatus.FAILED]
    assert "tool_timeout" in (result.actions[1].error or "")
    log = result.compensation_log
    assert log is not None and [e.maybe_applied for e in log.entries] == [False, True]
    assert [e.label() for e in log.entries] == ["compensated", "compensated"]
    message = log.entries[1].effect
    assert message.compensation_args == {"effect_key": message.idempotency_key}
    effects = await sim_admin.effects()
    assert [e.tool for e in effects] == [
        "create_ticket",
        "post_message",
        "delete_message",
        "close_ticket",
    ]
    assert effects[2].object_id == effects[1].object_id


async def test_rejected_action_is_not_logged(harness: Harness, sim_admin: SimAdmin) -> None:
    """A 4xx (non-retryable) declares "not applied": no log entry, no undo for it."""
    await sim_admin.set_tool_faults("post_message", [{"status": 422}])
    result: PipelineResult = await (await _start(harness, _input(TICKET, MESSAGE))).result()
    log = result.compensation_log
    assert log is not None and [e.effect.step for e in log.entries] == ["action#1"]
    assert "delete_message" not in await sim_admin.tool_calls()
