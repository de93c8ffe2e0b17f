"""The order-saga example (examples/order_saga) rolls back as its README says: shipping
fails, the card is refunded (with the refund's own retries), then the stock released; a
refund that never succeeds ends the run ``COMPENSATION_FAILED`` with the stock still
released. Runs the example's own workflow and activities on the time-skipping server."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order_saga"
sys.path.insert(0, str(EXAMPLE))

from order_activities import Ledger, OrderActivities  # noqa: E402
from order_workflows import Order, PlaceOrderWorkflow  # noqa: E402

from agent_failover.resilience.saga import CompensationLog  # noqa: E402

ORDER = Order(order_id="o1", sku="lamp-42", amount_cents=4_900)


async def _place(env: WorkflowEnvironment, ledger: Ledger) -> tuple[object, CompensationLog]:
    tq = f"orders-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client,
        task_queue=tq,
        workflows=[PlaceOrderWorkflow],
        activities=OrderActivities(ledger).all(),
    ):
        handle = await env.client.start_workflow(
            PlaceOrderWorkflow.run, ORDER, id=f"order-{uuid.uuid4().hex[:8]}", task_queue=tq
        )
        try:
            outcome: object = await handle.result()
        except WorkflowFailureError as exc:
            outcome = exc.cause
        log = await handle.query("compensation_log", result_type=CompensationLog)
    return outcome, log


async def test_failed_shipping_refunds_then_releases(ts_env: WorkflowEnvironment) -> None:
    ledger = Ledger(refund_failures=2)  # the refund's own retry policy absorbs two failures
    outcome, log = await _place(ts_env, ledger)
    assert isinstance(outcome, ActivityError)  # ship_order's failure, re-raised after undoing
    assert isinstance(outcome.cause, ApplicationError) and outcome.cause.type == "no_carrier"
    assert ledger.events == [
        ("reserve", "R-o1"),
        ("charge", "C-o1"),
        ("refund", "C-o1"),
        ("release", "R-o1"),
    ]
    assert [(e.effect.step, e.status.value) for e in log.entries] == [
        ("reserve", "compensated"),
        ("charge", "compensated"),
    ]


async def test_refund_that_never_succeeds_is_reported_not_dropped(
    ts_env: WorkflowEnvironment,
) -> None:
    ledger = Ledger(refund_failures=100)
    outcome, log = await _place(ts_env, ledger)
    assert isinstance(outcome, ApplicationError) and outcome.type == "COMPENSATION_FAILED"
    assert "charge (refund_card)" in outcome.message
    assert ledger.events[-1] == ("release", "R-o1")  # the other compensation still ran
    assert [e.status.value for e in log.entries] == ["compensated", "failed"]


async def test_order_ships_when_nothing_fails(ts_env: WorkflowEnvironment) -> None:
    ledger = Ledger(fail_shipping=False)
    outcome, log = await _place(ts_env, ledger)
    assert outcome == "S-o1"
    assert [e.status.value for e in log.entries] == ["applied", "applied"]


@pytest.mark.parametrize("step", ["reserve", "charge"])
def test_keys_are_per_step(step: str) -> None:
    """The example's effects carry distinct, stable keys (workflow id + step + tool + args)."""
    from agent_failover.saga import idempotency_key

    args = {"order_id": "o1", "sku": "lamp-42", "amount_cents": 4_900}
    assert idempotency_key("w", step, "t", args) == idempotency_key("w", step, "t", dict(args))
    assert idempotency_key("w", step, "t", args) != idempotency_key("w", "ship", "t", args)
