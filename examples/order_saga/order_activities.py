"""The order service's own side-effecting activities, each with its compensation.

A real project calls its inventory, payment and shipping APIs here; the example keeps a
:class:`Ledger` in memory so a test can check what was applied and undone. Every effect
takes the saga's idempotency key, so a retried activity never applies twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError


class Effect(BaseModel):
    key: str  # the idempotency key (agent_failover.saga.idempotency_key)
    order_id: str
    sku: str = ""
    amount_cents: int = 0


class Undo(BaseModel):
    key: str  # the key of the effect to undo
    ref: str  # what the effect created (reservation / charge id)


@dataclass
class Ledger:
    """What happened, in order: ("reserve", ref), ("release", ref), ..."""

    events: list[tuple[str, str]] = field(default_factory=list)
    applied: dict[str, str] = field(default_factory=dict)  # idempotency key -> ref
    fail_shipping: bool = True
    refund_failures: int = 0  # refunds that fail before one succeeds (retries absorb them)


class OrderActivities:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def _apply(self, kind: str, eff: Effect, prefix: str) -> str:
        if eff.key in self.ledger.applied:  # a retry of an effect already applied
            return self.ledger.applied[eff.key]
        ref = f"{prefix}-{eff.order_id}"
        self.ledger.applied[eff.key] = ref
        self.ledger.events.append((kind, ref))
        return ref

    @activity.defn
    async def reserve_stock(self, eff: Effect) -> str:
        return self._apply("reserve", eff, "R")

    @activity.defn
    async def release_stock(self, undo: Undo) -> None:
        self.ledger.events.append(("release", undo.ref))

    @activity.defn
    async def charge_card(self, eff: Effect) -> str:
        return self._apply("charge", eff, "C")

    @activity.defn
    async def refund_card(self, undo: Undo) -> None:
        if self.ledger.refund_failures > 0:
            self.ledger.refund_failures -= 1
            raise ApplicationError("payment API unavailable", type="payment_unavailable")
        self.ledger.events.append(("refund", undo.ref))

    @activity.defn
    async def ship_order(self, eff: Effect) -> str:
        if self.ledger.fail_shipping:
            raise ApplicationError(
                f"no carrier for {eff.sku}", type="no_carrier", non_retryable=True
            )
        return self._apply("ship", eff, "S")

    def all(self) -> list:
        return [
            self.reserve_stock,
            self.release_stock,
            self.charge_card,
            self.refund_card,
            self.ship_order,
        ]
