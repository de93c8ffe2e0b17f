"""Place one order and print how it ended (and the compensation log).

python starter.py ord-1
"""

from __future__ import annotations

import os
import sys
import uuid

from order_workflows import Order, PlaceOrderWorkflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_failover import run_and_exit

TASK_QUEUE = os.environ.get("ORDER_TASK_QUEUE", "orders")


async def main(order_id: str) -> None:
    client = await Client.connect(
        os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
        data_converter=pydantic_data_converter,
    )
    handle = await client.start_workflow(
        PlaceOrderWorkflow.run,
        Order(order_id=order_id, sku="lamp-42", amount_cents=4_900),
        id=f"order-{order_id}-{uuid.uuid4().hex[:6]}",
        task_queue=TASK_QUEUE,
    )
    try:
        print("shipped:", await handle.result())
    except WorkflowFailureError as exc:
        cause = exc.cause
        while cause is not None and cause.cause is not None:  # the root: ship_order's error
            cause = cause.cause
        print("order failed:", cause)
    log = await handle.query("compensation_log")
    for entry in log["entries"]:
        print(f"  {entry['effect']['step']:8} {entry['status']:12} {entry['error'] or ''}")


if __name__ == "__main__":
    run_and_exit(main(sys.argv[1] if len(sys.argv) > 1 else "ord-1"))
