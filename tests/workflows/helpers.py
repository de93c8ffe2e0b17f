"""A minimal user workflow that makes one resilient call, as any user workflow would."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from providers.models import ChatRequest
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
