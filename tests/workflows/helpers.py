"""A minimal user workflow that makes one resilient call, as any user workflow would."""

from __future__ import annotations

from typing import Any

from agent_failover.testing.roles import with_test_roles  # noqa: F401
from agent_failover.testing.workflows import (  # noqa: F401
    CallInput,
    RepeatedCallWorkflow,
    ResilientCallWorkflow,
)


async def drive_escalations(handle: Any, decisions: list[Any]) -> list[Any]:
    """Answer each pending escalation of a running pipeline with the next decision, until
    the run ends; return the ``status`` seen at each pending escalation."""
    import asyncio

    from agent_failover.workflows.models import EscalationState, PipelineStatus
    from agent_failover.workflows.pipeline import AgentPipelineWorkflow

    seen: list[PipelineStatus] = []
    result = asyncio.create_task(handle.result())
    while not result.done():
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.escalation is EscalationState.PENDING and decisions:
            seen.append(st)
            await handle.execute_update(AgentPipelineWorkflow.resolve, decisions.pop(0))
        await asyncio.wait([result], timeout=0.1)
    return seen


def attempt_activities(history: Any) -> list[tuple[str, str]]:
    """(activity type, task queue) of every activity of a run's history that ran a model
    attempt, in order: each ``call_model``, and each ``first_call`` that ran its call's
    first attempt (its result or its failure names the route; one that returned the role
    context only ran none)."""
    import json

    scheduled: dict[int, tuple[str, str]] = {}
    ran: list[tuple[int, tuple[str, str]]] = []
    for e in history.events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            a = e.activity_task_scheduled_event_attributes
            scheduled[e.event_id] = (a.activity_type.name, a.task_queue.name)
            if a.activity_type.name == "call_model":
                ran.append((e.event_id, scheduled[e.event_id]))
        elif e.HasField("activity_task_completed_event_attributes"):
            done = e.activity_task_completed_event_attributes
            kind = scheduled.get(done.scheduled_event_id, ("", ""))
            if kind[0] == "first_call" and "route" in json.loads(done.result.payloads[0].data):
                ran.append((done.scheduled_event_id, kind))
        elif e.HasField("activity_task_failed_event_attributes"):
            failed = e.activity_task_failed_event_attributes
            kind = scheduled.get(failed.scheduled_event_id, ("", ""))
            payloads = failed.failure.application_failure_info.details.payloads
            if kind[0] == "first_call" and len(payloads) > 1:
                ran.append((failed.scheduled_event_id, kind))
    return [kind for _, kind in sorted(ran)]
