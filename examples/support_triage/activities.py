"""This project's own activities (a module named ``activities``, the usual Temporal layout)."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import activity


class Customer(BaseModel):
    id: str
    plan: str
    open_tickets: int


@activity.defn
async def lookup_customer(customer_id: str) -> Customer:
    """Stands in for a CRM call; real projects do IO here."""
    plan = "enterprise" if customer_id.startswith("ent-") else "standard"
    return Customer(id=customer_id, plan=plan, open_tickets=len(customer_id) % 4)
