"""A call's first attempt planned and run in the activity that reads its role context
(``first_call``, issue 24), on the dev server against the simulator: a failure carries
the context back so the call fails over as before, a failure ``call_model`` would retry
on its route gets that one retry from the workflow, a first attempt that is not plain is
left to the workflow, and a ``first_call`` that fails without a context leaves the call
to read it with the local activity, as before."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode
from agent_failover.resilience.first_attempt import plans_hedge
from agent_failover.resilience.limits import MAX_REQUEST_BYTES
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.options import CallOptions
from agent_failover.resilience.triage import request_bytes
from agent_failover.service import workflow_runner
from agent_failover.testing.history import activity_rows, context_reads
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.workflows import RepeatedCallInput, RepeatedCallWorkflow
from agent_failover.workflows.models import PipelineInput, PipelineResult
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.workflows.conftest import Harness
from tests.workflows.helpers import CallInput, ResilientCallWorkflow, attempt_activities
from tests.workflows.test_patches_replay import REPLAY_WORKFLOWS
from tests.workflows.test_resilient_failover_devserver import _request

pytestmark = pytest.mark.devserver

PRIMARY = "anthropic-us-east"


async def _call(h: Harness, role: str = "plain") -> tuple[AgentOutput, WorkflowHistory]:
    wf_id = f"first-{uuid.uuid4().hex[:10]}"
    out: AgentOutput = await h.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role=role, request=_request(f"task {uuid.uuid4().hex[:6]}")),
        id=wf_id,
        task_queue=h.task_queue,
        result_type=AgentOutput,
    )
    return out, await h.client.get_workflow_handle(wf_id).fetch_history()


def _scheduled(history: WorkflowHistory) -> list[dict]:
    """Every scheduled activity: type, retry policy's maximum attempts, decoded input."""
    return [
        {
            "type": a.activity_type.name,
            "max_attempts": a.retry_policy.maximum_attempts,
            "input": json.loads(a.input.payloads[0].data),
        }
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        for a in [e.activity_task_scheduled_event_attributes]
    ]


async def _per_route(admin: SimAdmin) -> Counter[str]:
    return Counter(a["endpoint"] for a in await admin.attempts())


async def test_a_failed_first_attempt_brings_its_context_and_the_call_fails_over(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """The primary is overloaded: ``first_call`` fails with the context attached, the
    workflow folds the failure as any attempt's and the standby answers; no local
    activity reads the context a second time."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    out, history = await _call(harness)
    assert out.route != PRIMARY and out.capability is Capability.FULL
    assert [(a.route, a.outcome) for a in out.attempts] == [
        (PRIMARY, "overloaded"),
        (out.route, "ok"),
    ]
    assert [kind for kind, _ in attempt_activities(history)] == ["first_call", "call_model"]
    assert context_reads(history) == ["plain"]  # the first_call's; no role_context after
    assert await _per_route(sim_admin) == Counter({PRIMARY: 1, out.route: 1})


async def test_a_failure_call_model_would_retry_gets_its_one_same_route_retry(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A 500 on the primary: ``call_model`` would be retried once on its route by
    Temporal; ``first_call`` is not (a retry would plan afresh), so the workflow runs that
    retry, a ``call_model`` with one try, and the primary sees two attempts, as before."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "server_error"}])
    out, history = await _call(harness)
    assert out.route != PRIMARY and out.capability is not Capability.STATIC
    scheduled = _scheduled(history)
    assert [s["type"] for s in scheduled[:2]] == ["first_call", "call_model"]
    assert scheduled[1]["input"]["route"] == PRIMARY and scheduled[1]["max_attempts"] == 1
    assert any(e.HasField("timer_started_event_attributes") for e in history.events)
    assert (await _per_route(sim_admin))[PRIMARY] == 2


async def test_a_hedged_first_attempt_is_left_to_the_workflow(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A role whose plan hedges: ``first_call`` returns the context only (it cannot start
    a hedge beside its attempt) and the workflow runs the attempt, hedged as planned."""
    out, history = await _call(harness, role="hedged")
    assert out.capability is Capability.FULL
    scheduled = _scheduled(history)
    assert scheduled[0]["type"] == "first_call"
    assert next(kind for kind, _ in attempt_activities(history)) == "call_model"
    done = next(
        json.loads(e.activity_task_completed_event_attributes.result.payloads[0].data)
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
    )
    assert "route" not in done and "result" not in done and done["context"]["role"] == "hedged"
    # The lease the context took goes to the workflow's first attempt (on its route).
    lease = done["context"]["lease"]
    first_attempt = next(s for s in scheduled if s["type"] == "call_model")
    assert lease["route"] == first_attempt["input"]["route"]
    assert first_attempt["input"]["lease"]["id"] == lease["id"]


async def test_a_first_call_without_a_context_leaves_the_call_to_the_local_activity(
    harness: Harness, sim_admin: SimAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both tries of ``first_call`` fail before reading the context (a store fault): the
    call reads it with the ``role_context`` local activity and is answered as before."""

    class Failing:
        async def role_context(self, inp: object) -> None:
            raise RuntimeError("health store unreachable")

    monkeypatch.setattr(harness.activities.first, "_contexts", Failing())
    out, history = await _call(harness)
    assert out.route == PRIMARY and out.capability is Capability.FULL
    rows = [(r.activity_type, r.outcome) for r in await _rows(harness, history)]
    assert rows[0][0] == "first_call" and rows[0][1] != "completed"
    assert ("role_context", "completed") in rows and rows[-1] == ("call_model", "completed")


async def _rows(h: Harness, history: WorkflowHistory) -> list:
    return await activity_rows(h.client.get_workflow_handle(history.workflow_id))


async def _pipeline(h: Harness) -> tuple[WorkflowHandle, PipelineResult]:
    """Run the demo task's pipeline to its end: its handle and result."""
    handle = await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="Compare two queue designs"),
        id=f"first-pipe-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )
    return handle, await handle.result()


async def test_a_new_pipeline_history_replays(harness: Harness, sim_admin: SimAdmin) -> None:
    """A pipeline whose calls planned in their first attempts (one failing over) replays
    without a non-determinism error: the patch is asked before the roles' local activity,
    whose result a replay reads a workflow task earlier than the run did."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    handle, result = await _pipeline(harness)
    assert result.steps and all(s.output.capability is not Capability.STATIC for s in result.steps)
    replayer = Replayer(
        workflows=REPLAY_WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
    replayed = await replayer.replay_workflow(
        await handle.fetch_history(), raise_on_replay_failure=False
    )
    assert replayed.replay_failure is None


async def test_a_role_the_run_knows_hedges_reads_its_context_locally(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """The second call of a hedged role (no context reuse) knows from the first call's
    context that the role hedges: it reads its context with the local activity instead of
    a ``first_call`` that would hand the attempt back (one workflow task fewer)."""
    request = _request(f"twice {uuid.uuid4().hex[:6]}")
    wf_id = f"first-hedged-{uuid.uuid4().hex[:8]}"
    outs = await harness.client.execute_workflow(
        RepeatedCallWorkflow.run,
        RepeatedCallInput(
            roles=["hedged", "hedged"], request=request, options=CallOptions(context_reuse_s=0)
        ),
        id=wf_id,
        task_queue=harness.task_queue,
        result_type=list[AgentOutput],
    )
    assert [o.capability for o in outs] == [Capability.FULL, Capability.FULL]
    handle = harness.client.get_workflow_handle(wf_id)
    reads = [r.activity_type for r in await activity_rows(handle)]
    reads = [r for r in reads if r in ("first_call", "role_context")]
    assert reads == ["first_call", "role_context"]


async def test_a_pipeline_reads_its_hedging_roles_contexts_locally(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """The pipeline's roles say which hedge (``pipeline_roles``, recorded): those roles'
    calls read their context with the local activity, the others in ``first_call``."""
    hedging = {n for n, r in harness.policy.roles.items() if plans_hedge(r)}
    handle, result = await _pipeline(harness)
    history = await handle.fetch_history()
    by_first_call = {s["input"]["role"] for s in _scheduled(history) if s["type"] == "first_call"}
    called = {s.output.role for s in result.steps}
    assert called & hedging and called - hedging  # both kinds ran
    assert by_first_call == called - hedging
    assert set(context_reads(history)) == called


async def test_a_request_over_one_activity_input_is_bounded_before_it_is_sent(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A request larger than one activity input (earlier turns of ~0.4 MB each) is never
    sent to ``first_call`` uncut: the call reads its context with the local activity, the
    workflow cuts the request (CONTEXT_TRUNCATED), and no activity input in history is
    over the bound."""
    turn = "lorem ipsum " * (400_000 // 12)
    messages = [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"{i} {turn}") for i in range(3)
    ]
    request = ChatRequest(messages=[*messages, Message(role="user", content="and now?")])
    assert request_bytes(request) > MAX_REQUEST_BYTES
    wf_id = f"first-big-{uuid.uuid4().hex[:8]}"
    out: AgentOutput = await harness.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role="plain", request=request),
        id=wf_id,
        task_queue=harness.task_queue,
        result_type=AgentOutput,
    )
    assert ReasonCode.CONTEXT_TRUNCATED in out.reason_codes
    history = await harness.client.get_workflow_handle(wf_id).fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert "first_call" not in [a.activity_type.name for a in scheduled]
    assert context_reads(history) == ["plain"]  # the local activity's
    assert all(len(a.input.payloads[0].data) <= MAX_REQUEST_BYTES + 4096 for a in scheduled)
