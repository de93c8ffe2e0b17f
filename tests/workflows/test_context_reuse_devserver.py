"""Role contexts reused within a run, on the dev server: a role's second call within its
reuse age plans from the first call's context (one context read in history: the first
call's ``first_call`` activity), and reads its own once reuse is off, for another role, or
after a failure."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from agent_failover.resilience.contracts import AgentOutput, Capability
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.options import CallOptions
from agent_failover.testing.history import context_reads as history_context_reads
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.workflows import RepeatedCallInput, RepeatedCallWorkflow
from tests.workflows.conftest import Harness

pytestmark = pytest.mark.devserver

PRIMARY = "anthropic-us-east"
#: Far above the time two calls take, so a loaded machine cannot age the context out.
LONG_S = 60.0


async def _run(
    h: Harness, roles: list[str], options: CallOptions | None = None
) -> tuple[list[AgentOutput], WorkflowHandle]:
    request = ChatRequest(messages=[Message(role="user", content=f"t {uuid.uuid4().hex}")])
    handle = await h.client.start_workflow(
        RepeatedCallWorkflow.run,
        RepeatedCallInput(roles=roles, request=request, options=options),
        id=f"reuse-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=list[AgentOutput],
    )
    return await handle.result(), handle


async def context_reads(handle: WorkflowHandle) -> list[str]:
    """The roles of the run's role-context reads, in order (``first_call`` activities, or
    ``role_context`` local activities where a call read its context that way)."""
    return history_context_reads(await handle.fetch_history())


async def test_two_calls_of_a_role_share_one_context(harness: Harness) -> None:
    """Within the reuse age (the call's option) the second call runs no local activity."""
    outs, handle = await _run(harness, ["plain", "plain"], CallOptions(context_reuse_s=LONG_S))
    assert [o.capability for o in outs] == [Capability.FULL, Capability.FULL]
    assert await context_reads(handle) == ["plain"]


async def test_the_roles_policy_sets_the_reuse_age(harness: Harness) -> None:
    """Without an option the role's ``context_reuse_s`` applies: five calls, one read."""
    plain = harness.policy.roles["plain"]
    harness.policy.roles["plain"] = plain.model_copy(update={"context_reuse_s": LONG_S})
    outs, handle = await _run(harness, ["plain"] * 5)
    assert len(outs) == 5
    assert len(await context_reads(handle)) == 1


async def test_a_reuse_age_of_zero_reads_every_time(harness: Harness) -> None:
    """``context_reuse_s=0``: each call reads its own context."""
    _, handle = await _run(harness, ["plain", "plain"], CallOptions(context_reuse_s=0))
    assert len(await context_reads(handle)) == 2


async def test_different_roles_never_share(harness: Harness) -> None:
    """Two roles over the same routes, alternating: each call of a new role reads, the
    repeat of a role reuses its own."""
    opts = CallOptions(context_reuse_s=LONG_S)
    _, handle = await _run(harness, ["plain", "tight-sla", "plain", "tight-sla"], opts)
    assert await context_reads(handle) == ["plain", "tight-sla"]


async def test_a_calls_options_stay_with_that_call(harness: Harness, sim_admin: SimAdmin) -> None:
    """The first call opts in to content-filter failover; the second, reusing its context,
    gets the role's own setting: the primary's refusal (set while the run waits between
    the calls) comes back as a refusal, no other model tried."""
    opts = CallOptions(context_reuse_s=LONG_S)
    request = ChatRequest(messages=[Message(role="user", content=f"t {uuid.uuid4().hex}")])
    first = CallOptions(context_reuse_s=LONG_S, content_filter="failover")
    handle = await harness.client.start_workflow(
        RepeatedCallWorkflow.run,
        RepeatedCallInput(
            roles=["plain", "plain"], request=request, per_call=[first, opts], gap_s=3.0
        ),
        id=f"reuse-opts-{uuid.uuid4().hex[:8]}",
        task_queue=harness.task_queue,
        result_type=list[AgentOutput],
    )
    await _timer_started(handle)
    await sim_admin.set_faults(PRIMARY, [{"kind": "content_filter"}])
    outs = await handle.result()
    assert outs[0].route == PRIMARY and not outs[0].refused
    assert outs[1].refused and outs[1].route == PRIMARY
    assert len(await context_reads(handle)) == 1


async def _timer_started(handle: WorkflowHandle) -> None:
    """Wait until the run starts its timer between the calls."""
    for _ in range(200):
        history = await handle.fetch_history()
        if any(e.event_type == EventType.EVENT_TYPE_TIMER_STARTED for e in history.events):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the run never started its timer")


async def test_a_failed_attempt_makes_the_next_call_read_afresh(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """The primary fails the first call's first attempt: the second call plans from a
    context read after that failure, not the first call's."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    outs, handle = await _run(harness, ["plain", "plain"], CallOptions(context_reuse_s=LONG_S))
    assert outs[0].attempts[0].route == PRIMARY and outs[0].attempts[0].outcome != "ok"
    assert len(await context_reads(handle)) == 2


async def test_only_the_call_that_read_the_context_carries_its_lease(harness: Harness) -> None:
    """The in-flight lease a role context took (issue 24) is the first attempt's of the
    call that read it: the call reusing the context hands its attempt none (that attempt
    takes its own), so no attempt ever counts on a lease already given back."""
    _, handle = await _run(harness, ["plain", "plain"], CallOptions(context_reuse_s=LONG_S))
    inputs, firsts = [], []
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            if a.activity_type.name == "call_model":
                inputs.append(json.loads(a.input.payloads[0].data))
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            result = json.loads(e.activity_task_completed_event_attributes.result.payloads[0].data)
            if "context" in result:
                firsts.append(result)
    # The first call's attempt ran in the activity that read the context, on the lease it
    # took; the second call's (its own activity) got none handed.
    (first,) = firsts
    assert first["route"] == PRIMARY and first["context"]["lease"]["route"] == PRIMARY
    assert len(inputs) == 1 and inputs[0]["route"] == PRIMARY
    assert "lease" not in inputs[0]
