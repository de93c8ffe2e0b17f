"""The whole local stack in one process: simulator, Temporal dev server, stores, worker.

Used by ``failover dev`` (runs until Ctrl-C), ``failover demo`` and the dev-server tests.
The policy is loaded after the simulator starts, because the demo policy's base URLs
read ``SIM_URL``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy_or_exit
from agent_failover.resilience.config import PolicyConfig
from agent_failover.service import (
    DEFAULT_TASK_QUEUE,
    WorkerDeps,
    build_deps,
    build_workers,
    ensure_monitor,
)
from agent_failover.stores.factory import DEFAULT_REDIS_URL
from agent_failover.testing.servers import STATE_DIR, start_dev_server, ui_url
from agent_failover.testing.sim.server import RunningSimulator, start_simulator

STACK_FILE = STATE_DIR / "stack.json"


@dataclass
class DevStack:
    """Handles to the running pieces; ``await stop()`` tears them down in reverse."""

    sim: RunningSimulator
    env: WorkflowEnvironment
    policy: PolicyConfig
    deps: WorkerDeps
    workers: list[Worker]
    address: str
    ui: str | None
    task_queue: str = DEFAULT_TASK_QUEUE
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def client(self) -> Client:
        return self.env.client

    async def stop(self) -> None:
        for w in self.workers:
            with contextlib.suppress(Exception):
                await w.shutdown()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.deps.close()
        await self.env.shutdown()
        await self.sim.stop()
        with contextlib.suppress(FileNotFoundError):
            STACK_FILE.unlink()


async def start_stack(
    *,
    policy_path: str | os.PathLike[str] | None = None,
    temporal_port: int | None = None,
    ui: bool = True,
    ui_port: int | None = None,
    sim_port: int = 0,
    persist: bool = True,
    monitor: bool = True,
    task_queue: str = DEFAULT_TASK_QUEUE,
    redis_url: str | None = None,
    namespace: str | None = None,
) -> DevStack:
    """Start simulator, Temporal (with UI), stores and workers; return when ready."""
    sim = await start_simulator(port=sim_port)
    os.environ["SIM_URL"] = sim.url
    policy = load_policy_or_exit(
        policy_path or os.environ.get("FAILOVER_POLICY", DEFAULT_POLICY_PATH)
    )
    env = await start_dev_server(
        port=temporal_port,
        ui=ui,
        ui_port=ui_port,
        db_file=(STATE_DIR / "temporal.db") if persist else None,
    )
    address = env.client.service_client.config.target_host
    deps = await build_deps(
        policy,
        redis_url=redis_url or os.environ.get("REDIS_URL"),
        namespace=namespace,
    )
    workers = build_workers(env.client, deps, task_queue=task_queue)
    tasks = [asyncio.create_task(w.run()) for w in workers]
    stack = DevStack(
        sim=sim,
        env=env,
        policy=policy,
        deps=deps,
        workers=workers,
        address=address,
        ui=ui_url(address, ui_port) if ui else None,
        task_queue=task_queue,
        _tasks=tasks,
    )
    if monitor:
        await ensure_monitor(env.client, policy, task_queue=task_queue)
    STACK_FILE.parent.mkdir(parents=True, exist_ok=True)
    STACK_FILE.write_text(
        json.dumps(
            {
                "temporal_address": address,
                "ui": stack.ui,
                "sim_url": sim.url,
                "redis_url": (
                    deps.stores.embedded.url
                    if deps.stores.embedded
                    else (redis_url or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL)
                ),
                "redis": deps.stores.backend,
                "namespace": namespace or os.environ.get("FAILOVER_REDIS_NAMESPACE", "failover"),
                "task_queue": task_queue,
                "pid": os.getpid(),
            }
        )
    )
    return stack


def read_stack_file() -> dict[str, str] | None:
    """What a running ``failover dev`` wrote about itself, if anything."""
    try:
        return json.loads(Path(STACK_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
