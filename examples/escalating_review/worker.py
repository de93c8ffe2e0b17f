"""The review service's worker: its workflow and agent-failover.

    SIM_URL=http://127.0.0.1:8400 python worker.py

Temporal is reached through the standard variables / profile (TEMPORAL_ADDRESS, ...);
health state and the response cache go to REDIS_URL (default redis://127.0.0.1:6379/0).
On-call is paged at FAILOVER_ESCALATION_WEBHOOK_URL when it is set.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from review_workflows import ChangeReviewWorkflow
from temporalio.worker import Worker

from agent_failover import FailoverPlugin, connect_client, run_and_exit

TASK_QUEUE = os.environ.get("REVIEW_TASK_QUEUE", "change-review")
POLICY = Path(__file__).with_name("policy.yaml")


async def main() -> None:
    failover = FailoverPlugin(POLICY, include_pipeline=False)
    client = await connect_client()
    worker = Worker(
        client, task_queue=TASK_QUEUE, workflows=[ChangeReviewWorkflow], plugins=[failover]
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        print(f"worker ready on task queue {TASK_QUEUE}", flush=True)
        await stop.wait()
    await failover.aclose()


if __name__ == "__main__":
    run_and_exit(main())
