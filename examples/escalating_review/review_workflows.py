"""A user workflow that asks a human when its critical answer cannot be trusted.

``ChangeReviewWorkflow`` reviews a change with the ``reviewer`` role through
``resilient_complete``, then hands the answer to ``escalate``: when the reviewer could only
be answered by its static fallback, from the response cache (every model tier down) or
below its ``min_confidence``, the run pauses with its state (the change under review),
sets ``EscalationState = "pending"``, pages on-call (when the worker has a webhook URL)
and waits for ``failover resolve ID ACTION``. Inheriting ``EscalationHandlers`` gives it
the ``resolve`` update and the ``escalation`` query.
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover import (
        AgentOutput,
        ChatRequest,
        EscalationHandlers,
        Message,
        escalate,
        resilient_complete,
    )
    from agent_failover.visibility import upsert_failover_search_attributes


class ReviewInput(BaseModel):
    change: str
    role: str = "reviewer"


class ReviewResult(BaseModel):
    answer: AgentOutput
    #: How a human answered it (retry, accept_degraded, provide_output), if one was asked.
    decision: str | None = None
    trigger: str | None = None
    attempts: int = 1


@workflow.defn
class ChangeReviewWorkflow(EscalationHandlers):
    # Nobody answering within an hour fails the run with the reason (also: accept_degraded,
    # abort). The class attribute is read at the first escalation.
    escalation_settings = {"timeout_s": 3600.0, "timeout_action": "fail"}

    @workflow.run
    async def run(self, inp: ReviewInput) -> ReviewResult:
        request = ChatRequest(
            messages=[Message(role="user", content=f"Review this change:\n{inp.change}")],
            max_tokens=300,
        )
        attempts = 0
        while True:
            attempts += 1
            answer = await resilient_complete(inp.role, request)
            outcome = await escalate("review", answer, state={"change": inp.change})
            if not outcome.retry:  # a human's "retry" runs the review again
                break
        upsert_failover_search_attributes([outcome.output])
        decision = outcome.decision
        return ReviewResult(
            answer=outcome.output,
            decision=decision.action.value if decision else None,
            trigger=outcome.trigger,
            attempts=attempts,
        )
