"""Run this project's worker with agent-failover on it: one plugin, nothing else to wire.

    SIM_URL=http://127.0.0.1:8400 python worker.py

Temporal is reached through the standard variables / profile (TEMPORAL_ADDRESS, ...);
health and cache state go to REDIS_URL (default redis://127.0.0.1:6379/0).
"""

from __future__ import annotations

import asyncio
import signal

from temporalio.worker import Worker

from activities import lookup_customer
from agent_failover import FailoverPlugin, connect_client, run_and_exit
from config import POLICY_PATH, TASK_QUEUE
from workflows import TriageWorkflow


async def main() -> None:
    plugin = FailoverPlugin(POLICY_PATH, include_pipeline=False)
    client = await connect_client()
    worker = Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=[TriageWorkflow],
        activities=[lookup_customer],
        plugins=[plugin],
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        print(f"worker ready on task queue {TASK_QUEUE}", flush=True)
        await stop.wait()
    await plugin.aclose()


if __name__ == "__main__":
    run_and_exit(main())
