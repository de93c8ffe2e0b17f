"""This project's own workflow: triage a support ticket with an LLM that may fail over.

``resilient_complete`` plans the call from the ``triage`` role's policy: primary, hot
standbys in another region or provider, a smaller model, the cache, then a static,
schema-valid answer. The workflow sees one ``AgentOutput`` with its degradation contract
and records the failover search attributes, so degraded runs are one filter away in the
Temporal UI (``Degraded = true``).
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import Customer, lookup_customer
    from agent_failover import (
        AgentOutput,
        CallOptions,
        ChatRequest,
        Message,
        resilient_complete,
    )
    from agent_failover.visibility import upsert_failover_search_attributes


class TicketInput(BaseModel):
    customer_id: str
    text: str
    deadline_ms: float | None = None


class TriageResult(BaseModel):
    severity: str
    team: str
    customer: Customer
    answer: AgentOutput


@workflow.defn
class TriageWorkflow:
    @workflow.run
    async def run(self, ticket: TicketInput) -> TriageResult:
        customer = await workflow.execute_activity(
            lookup_customer,
            ticket.customer_id,
            start_to_close_timeout=timedelta(seconds=10),
            summary="CRM lookup",
        )
        request = ChatRequest(
            messages=[
                Message(
                    role="user",
                    content=f"Customer plan: {customer.plan}. Ticket: {ticket.text}",
                )
            ],
            max_tokens=200,
        )
        options = CallOptions(deadline_ms=ticket.deadline_ms) if ticket.deadline_ms else None
        answer = await resilient_complete("triage", request, options=options)
        upsert_failover_search_attributes([answer])
        data = answer.data if isinstance(answer.data, dict) else {}
        return TriageResult(
            severity=str(data.get("severity", "medium")),
            team=str(data.get("team", "support-oncall")),
            customer=customer,
            answer=answer,
        )
