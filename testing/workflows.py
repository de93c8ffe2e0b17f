"""Minimal workflows that make one resilient call, as any user workflow would.

Register them on a test worker to drive ``resilient_complete`` from a test or benchmark:
:class:`ResilientCallWorkflow` returns the whole :class:`AgentOutput`;
:class:`ResilientTextWorkflow` returns only the answer's text, like the bare one-activity
workflow (:mod:`agent_failover.testing.bare`), so a benchmark compares the call and not the
size of what the workflow returns. :class:`RepeatedCallWorkflow` makes several calls in one
run (one role after another, optionally a timer between them), as an agent loop does.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field, model_serializer
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.contracts import AgentOutput
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.options import CallOptions
    from agent_failover.workflows.inputs import workflow_input
    from agent_failover.workflows.resilient import resilient_complete
    from agent_failover.workflows.shadow import settle_shadows


class CallInput(BaseModel):
    role: str
    request: ChatRequest
    options: CallOptions | None = None

    @model_serializer(mode="wrap", when_used="json")
    def _compact(self, handler: Any) -> Any:
        # The workflow's input is in history: without the request's defaults (they decode
        # back), as small as the bare workflow's input (a fair history comparison).
        out = handler(self)
        out["request"] = self.request.model_dump(mode="json", exclude_defaults=True)
        if self.options is None:
            del out["options"]
        return out


async def _one_call(args: tuple[Any, ...], workflow_name: str) -> AgentOutput:
    # Untyped on purpose (see workflows.inputs): bad input fails the run, not the task.
    inp = workflow_input(CallInput, args, workflow_name=workflow_name)
    out = await resilient_complete(inp.role, inp.request, options=inp.options)
    await settle_shadows()  # a sampled call's shadow evaluation must outlive this run
    return out


@workflow.defn(name="ResilientCallWorkflow")
class ResilientCallWorkflow:
    @workflow.run
    async def run(self, *args: Any) -> AgentOutput:
        return await _one_call(args, "ResilientCallWorkflow")


@workflow.defn(name="ResilientTextWorkflow")
class ResilientTextWorkflow:
    @workflow.run
    async def run(self, *args: Any) -> str:
        return (await _one_call(args, "ResilientTextWorkflow")).content


class RepeatedCallInput(BaseModel):
    """The roles called one after the other in one run (a role may repeat), each with
    ``request`` and ``options`` (``per_call[i]``, when given, replaces them for call i);
    ``gap_s`` of workflow timer between two calls."""

    roles: list[str]
    request: ChatRequest
    options: CallOptions | None = None
    per_call: list[CallOptions | None] = Field(default_factory=list)
    gap_s: float = 0.0

    def options_of(self, i: int) -> CallOptions | None:
        """Call ``i``'s options."""
        return self.per_call[i] if i < len(self.per_call) else self.options


@workflow.defn(name="RepeatedCallWorkflow")
class RepeatedCallWorkflow:
    @workflow.run
    async def run(self, *args: Any) -> list[AgentOutput]:
        inp = workflow_input(RepeatedCallInput, args, workflow_name="RepeatedCallWorkflow")
        outs: list[AgentOutput] = []
        for i, role in enumerate(inp.roles):
            if i and inp.gap_s > 0:
                await workflow.sleep(timedelta(seconds=inp.gap_s), summary="between calls")
            outs.append(await resilient_complete(role, inp.request, options=inp.options_of(i)))
        await settle_shadows()
        return outs
