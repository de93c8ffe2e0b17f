"""Run the order service's worker (no LLM here: the saga helper needs no plugin).

python worker.py        # Temporal at TEMPORAL_ADDRESS (default 127.0.0.1:7233)
"""

from __future__ import annotations

import asyncio
import os

from order_activities import Ledger, OrderActivities
from order_workflows import PlaceOrderWorkflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from agent_failover import run_and_exit

TASK_QUEUE = os.environ.get("ORDER_TASK_QUEUE", "orders")


async def main() -> None:
    client = await Client.connect(
        os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
        data_converter=pydantic_data_converter,
    )
    acts = OrderActivities(Ledger(fail_shipping=os.environ.get("FAIL_SHIPPING", "1") == "1"))
    async with Worker(
        client, task_queue=TASK_QUEUE, workflows=[PlaceOrderWorkflow], activities=acts.all()
    ):
        print(f"worker ready on task queue {TASK_QUEUE}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    run_and_exit(main())
