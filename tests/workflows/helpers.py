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
