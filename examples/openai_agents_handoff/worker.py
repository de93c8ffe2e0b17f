"""The support desk's worker: the Agents SDK plugin, the tool activities, agent-failover.

    SIM_URL=http://127.0.0.1:8400 python worker.py

Temporal is reached through the standard variables / profile (TEMPORAL_ADDRESS, ...);
health state goes to REDIS_URL (default redis://127.0.0.1:6379/0).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from temporalio.openai_agents import OpenAIAgentsPlugin
from temporalio.worker import Worker
from tools import get_local_time, get_weather

from agent_failover import FailoverPlugin, connect_client, run_and_exit
from workflows import SupportChatWorkflow

TASK_QUEUE = os.environ.get("SUPPORT_TASK_QUEUE", "support-agents")
POLICY = Path(__file__).with_name("policy.yaml")


async def main() -> None:
    failover = FailoverPlugin(POLICY, include_pipeline=False)
    client = await connect_client()
    worker = Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=[SupportChatWorkflow],
        activities=[get_weather, get_local_time],
        # OpenAIAgentsPlugin first: it insists on its payload converter, ours accepts it.
        # Its model activity is not registered: FailoverRunner never calls it (and the
        # default one would want OPENAI_API_KEY).
        plugins=[OpenAIAgentsPlugin(register_activities=False), failover],
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
