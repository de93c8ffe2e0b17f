"""``PlaceOrderWorkflow``: reserve stock, charge the card, ship — or undo in reverse.

Each side effect that succeeds registers its compensation in an ``agent_failover.saga.Saga``;
when a later step fails (or the run is cancelled) ``async with saga`` undoes them newest
first, each with its own retry policy, then re-raises. A compensation that still fails
ends the run as ``COMPENSATION_FAILED`` with the list, after the others ran.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from order_activities import Effect, OrderActivities, Undo

    from agent_failover.saga import Saga

STEP_TIMEOUT = timedelta(seconds=30)
NO_RETRY = RetryPolicy(maximum_attempts=1)
#: Refunds matter more than the rest: retried longer, still bounded.
REFUND_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=6
)


class Order(BaseModel):
    order_id: str
    sku: str
    amount_cents: int


@workflow.defn
class PlaceOrderWorkflow:
    def __init__(self) -> None:
        self.saga = Saga()

    @workflow.run
    async def run(self, order: Order) -> str:
        self.saga.attach_query()  # `temporal workflow query --type compensation_log`
        async with self.saga:
            eff = self._effect("reserve", "reserve_stock", order)
            ref = await workflow.execute_activity_method(
                OrderActivities.reserve_stock, eff, start_to_close_timeout=STEP_TIMEOUT
            )
            self.saga.add(
                OrderActivities.release_stock,
                Undo(key=eff.key, ref=ref),
                step="reserve",
                tool="reserve_stock",
                args=eff.model_dump(exclude={"key"}),
                key=eff.key,
                result={"id": ref},
            )
            eff = self._effect("charge", "charge_card", order)
            ref = await workflow.execute_activity_method(
                OrderActivities.charge_card, eff, start_to_close_timeout=STEP_TIMEOUT
            )
            self.saga.add(
                OrderActivities.refund_card,
                Undo(key=eff.key, ref=ref),
                step="charge",
                tool="charge_card",
                args=eff.model_dump(exclude={"key"}),
                key=eff.key,
                result={"id": ref},
                retry_policy=REFUND_RETRY,
            )
            return await workflow.execute_activity_method(
                OrderActivities.ship_order,
                self._effect("ship", "ship_order", order),
                start_to_close_timeout=STEP_TIMEOUT,
                retry_policy=NO_RETRY,
            )

    def _effect(self, step: str, tool: str, order: Order) -> Effect:
        args = {"order_id": order.order_id, "sku": order.sku, "amount_cents": order.amount_cents}
        return Effect(key=self.saga.key(step, tool, args), **args)
