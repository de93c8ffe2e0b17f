"""A minimal user workflow that makes one resilient call, as any user workflow would."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from providers.models import ChatRequest
    from resilience.config import PolicyConfig
    from resilience.contracts import AgentOutput
    from workflows.resilient import resilient_complete


class CallInput(BaseModel):
    role: str
    request: ChatRequest


@workflow.defn(name="ResilientCallWorkflow")
class ResilientCallWorkflow:
    @workflow.run
    async def run(self, inp: CallInput) -> AgentOutput:
        return await resilient_complete(inp.role, inp.request)


def with_test_roles(base: PolicyConfig, *, hedge_delay_ms: float = 200.0) -> PolicyConfig:
    """The policy plus three roles derived from ``analyst`` for tests and benchmarks.

    ``plain`` never hedges (one route at a time, so conduct is exact); ``hedged`` hedges
    after ``hedge_delay_ms``; ``tight-sla`` is ``plain`` with a 250/400 ms p95/p99 SLA.
    """
    analyst = base.role("analyst")
    plain = analyst.model_copy(
        update={"name": "plain", "hedging": analyst.hedging.model_copy(update={"enabled": False})}
    )
    hedged = analyst.model_copy(
        update={
            "name": "hedged",
            "hedging": analyst.hedging.model_copy(
                update={"enabled": True, "delay_ms": hedge_delay_ms, "max_hedges": 1}
            ),
        }
    )
    tight = plain.model_copy(
        update={
            "name": "tight-sla",
            "sla": plain.sla.model_copy(
                update={"p95_ms": 250.0, "p99_ms": 400.0, "min_samples": 4}
            ),
        }
    )
    roles = {**base.roles, "plain": plain, "hedged": hedged, "tight-sla": tight}
    return base.model_copy(update={"roles": roles})


async def drive_escalations(handle: Any, decisions: list[Any]) -> list[Any]:
    """Answer each pending escalation of a running pipeline with the next decision, until
    the run ends; return the ``status`` seen at each pending escalation."""
    import asyncio

    from workflows.models import EscalationState, PipelineStatus
    from workflows.pipeline import AgentPipelineWorkflow

    seen: list[PipelineStatus] = []
    result = asyncio.create_task(handle.result())
    while not result.done():
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.escalation is EscalationState.PENDING and decisions:
            seen.append(st)
            await handle.signal(AgentPipelineWorkflow.resolve_escalation, decisions.pop(0))
        await asyncio.wait([result], timeout=0.1)
    return seen
