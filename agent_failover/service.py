"""The agent-failover worker's wiring: policy, HTTP client, stores, Temporal workers.

``python worker.py`` (or ``failover worker``) calls :func:`run`, which connects to
Temporal through ``temporalio.envconfig`` (profile, ``TEMPORAL_ADDRESS``,
``TEMPORAL_NAMESPACE``, TLS, API key; default 127.0.0.1:7233, where ``failover dev``
serves), loads and validates the policy (``FAILOVER_POLICY``, required: exit 2 saying so when unset,
and with the errors on a bad file), builds one HTTP client and the stores (``REDIS_URL``;
unreachable: exit 1, or worker-local state with ``FAILOVER_REDIS_UNREACHABLE=degraded``),
registers the workflows and
activities with a task queue per bulkhead, starts the health monitor idempotently and
restarts it whenever it ends, and on SIGTERM/SIGINT stops polling and gives in-flight
activities ``FAILOVER_SHUTDOWN_GRACE_S`` (default 30 s) to finish before cancelling them.
Logging is quiet by default (``LOG_LEVEL``, default INFO, without httpx's per-request
lines; ``LOG_LEVEL=DEBUG`` for everything). ``FAILOVER_WORKER_ROLE`` picks what one process serves
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
from datetime import timedelta
from pathlib import Path
from typing import Literal

import httpx
from temporalio.client import Client
from temporalio.converter import PayloadCodec
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agent_failover.activities.notify import build_webhook_client
from agent_failover.codec import AesGcmCodec, CodecConfigError, codec_from_env
from agent_failover.config.loader import load_policy_or_exit
from agent_failover.connect import connect_client, connect_config, run_and_exit
from agent_failover.plugin import (
    PASSTHROUGH_MODULES,
    STRICT_PASSTHROUGH_MODULES,
    FailoverPlugin,
    llm_task_queue,
    with_passthrough,
)
from agent_failover.providers.client import policy_http_client
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.pipeline import pipeline_policy_errors
from agent_failover.resilience.setup_errors import SetupError, TemporalUnreachable
from agent_failover.startup import policy_version
from agent_failover.stores.factory import Stores, connect_stores, env_seconds
from agent_failover.supervisor import (
    DEFAULT_STICKY_QUEUE_TIMEOUT,
    DEFAULT_TASK_QUEUE,
    keep_monitor_running,
)

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "PASSTHROUGH_MODULES",
    "WorkerDeps",
    "WorkerRole",
    "build_deps",
    "build_workers",
    "llm_task_queue",
    "parse_worker_role",
    "run",
    "run_until_stopped",
    "workflow_runner",
]

log = logging.getLogger("agent_failover.worker")

#: Workflow-task and tool-activity slots of the main worker.
MAIN_WORKER_ACTIVITY_SLOTS = 32
#: Seconds in-flight activities get to finish after SIGTERM before they are cancelled.
DEFAULT_SHUTDOWN_GRACE_S = 30.0


@dataclass(frozen=True)
class WorkerRole:
    """What one worker process serves: the main queue (workflows, tools, health and cache
    activities, the monitor) and/or the model calls of some bulkheads."""

    main: bool = True
    bulkheads: tuple[str, ...] = field(default=())
    #: Serves ``<queue>-shadow`` (shadow evaluations), when the policy has shadow roles.
    shadow: bool = False

    def describe(self) -> str:
        parts = (["main"] if self.main else []) + [f"bulkhead:{b}" for b in self.bulkheads]
        return ",".join(parts + (["shadow"] if self.shadow else []))


def parse_worker_role(text: str | None, policy: PolicyConfig) -> WorkerRole:
    """``FAILOVER_WORKER_ROLE``: ``all`` (default: main, every bulkhead and the shadow
    queue), ``main``, ``bulkhead:<name>``, ``shadow``, or a comma-separated mix such as
    ``main,bulkhead:core``.

    Raises ``ValueError`` naming the bad entry and the bulkheads the policy has.
    """
    known = sorted({r.bulkhead for r in policy.roles.values()})
    entries = [e.strip() for e in (text or "all").split(",") if e.strip()] or ["all"]
    main, shadow, bulkheads = False, False, []
    for entry in entries:
        kind, _, name = entry.partition(":")
        if entry == "shadow":
            shadow = True
        elif entry in ("all", "main"):
            main = True
            shadow = shadow or entry == "all"
            bulkheads += known if entry == "all" else []
        elif kind == "bulkhead" and name in known:
            bulkheads.append(name)
        else:
            raise ValueError(
                f"FAILOVER_WORKER_ROLE: {entry!r} is not all, main, shadow or bulkhead:<name> "
                f"with a bulkhead of the policy ({', '.join(known)})"
            )
    return WorkerRole(main=main, bulkheads=tuple(dict.fromkeys(bulkheads)), shadow=shadow)


def workflow_runner(*, strict: bool = False) -> SandboxedWorkflowRunner:
    """The sandbox with our deterministic modules passed through.

    ``strict=True``: only our third-party dependencies are passed through, so our own
    workflow code is imported afresh for every run and every sandbox restriction applies
    to it (the replay tests use it to hold our code to the sandbox's rules).
    """
    modules = STRICT_PASSTHROUGH_MODULES if strict else PASSTHROUGH_MODULES
    runner = with_passthrough(None, modules)
    assert isinstance(runner, SandboxedWorkflowRunner)
    return runner


@dataclass
class WorkerDeps:
    """What every worker of one process shares: policy, the providers' HTTP client, the
    stores, and the escalation webhook's own client (it honours the proxy env vars)."""

    policy: PolicyConfig
    http: httpx.AsyncClient
    stores: Stores
    notify_http: httpx.AsyncClient = field(default_factory=build_webhook_client)

    async def close(self) -> None:
        await self.http.aclose()
        await self.notify_http.aclose()
        await self.stores.close()


async def build_deps(
    policy: PolicyConfig,
    *,
    redis_url: str | None,
    namespace: str | None = None,
    codec: PayloadCodec | None = None,
    embedded: bool = False,
) -> WorkerDeps:
    """One HTTP client and one pair of stores for the whole process.

    ``embedded`` (``failover dev`` / ``demo``): an embedded Redis when no URL is set and
    none answers locally; otherwise an unreachable Redis is :class:`RedisUnreachable`
    (or the degraded local view, ``FAILOVER_REDIS_UNREACHABLE=degraded``).

    ``namespace`` prefixes every Redis key (default ``FAILOVER_REDIS_NAMESPACE``, else
    ``failover``): deployments sharing a Redis keep separate health state. ``codec``
    (default: the environment's, if any) seals the cached answers in Redis.
    """
    stores = await connect_stores(
        redis_url,
        namespace=namespace or os.environ.get("FAILOVER_REDIS_NAMESPACE", "failover"),
        codec=codec or codec_from_env(),
        embedded_fallback=embedded,
    )
    http = policy_http_client(policy)
    return WorkerDeps(policy, http, stores)


def shutdown_grace_s(env: Mapping[str, str] | None = None) -> float:
    """``FAILOVER_SHUTDOWN_GRACE_S`` (seconds >= 0), default 30; ``ValueError`` if invalid."""
    return env_seconds("FAILOVER_SHUTDOWN_GRACE_S", DEFAULT_SHUTDOWN_GRACE_S, high=86_400, env=env)


def sticky_queue_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """``FAILOVER_STICKY_QUEUE_TIMEOUT_S`` (seconds, above 0 and at most 60), default 2:
    how long a run's next workflow task waits for the worker that ran it before any worker
    takes it. ``ValueError`` if invalid."""
    default = DEFAULT_STICKY_QUEUE_TIMEOUT.total_seconds()
    return env_seconds("FAILOVER_STICKY_QUEUE_TIMEOUT_S", default, high=60, low_open=True, env=env)


def dispatch_from_env(env: Mapping[str, str] | None = None) -> Literal["eager", "queue"] | None:
    """``FAILOVER_DISPATCH`` (``eager`` / ``queue``), None when unset (the plugin decides)."""
    raw = (os.environ if env is None else env).get("FAILOVER_DISPATCH", "").strip().lower()
    if not raw:
        return None
    if raw not in ("eager", "queue"):
        raise ValueError(f"FAILOVER_DISPATCH: expected 'eager' or 'queue', got {raw!r}")
    return raw  # type: ignore[return-value]


def build_workers(
    client: Client,
    deps: WorkerDeps,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    bulkhead_slots: Mapping[str, int] | None = None,
    role: WorkerRole | None = None,
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_S,
) -> list[Worker]:
    """The deployment's workers for ``role`` (default: main plus every bulkhead), through
    :class:`FailoverPlugin`.

    The main worker runs its bulkheads beside it while it runs; a process without the main
    role gets one worker per bulkhead it serves. The monitor is kept running by the caller
    (:func:`keep_monitor_running`). The client's payload codec, if any, is the plugin's.
    On shutdown every worker stops polling at once and gives running activities
    ``shutdown_grace_s`` to finish before cancelling them.
    """
    grace = timedelta(seconds=shutdown_grace_s)
    plugin = FailoverPlugin(
        deps.policy,
        stores=deps.stores,
        http=deps.http,
        notify_http=deps.notify_http,
        start_monitor=False,
        # The service worker runs the bundled pipeline (a user's worker does not); `failover
        # dev` with a policy of the user's own, without the pipeline's roles, runs without it.
        include_pipeline=not pipeline_policy_errors(deps.policy.roles),
        bulkhead_slots=bulkhead_slots,
        bulkheads=role.bulkheads if role is not None and role.main else None,
        dispatch=dispatch_from_env(),
        codec=client.data_converter.payload_codec or False,
        sticky_queue_timeout=timedelta(seconds=sticky_queue_timeout_s()),
        # The main worker runs the shadow queue beside it unless the role leaves it out.
        shadow=None if role is None or (role.main and role.shadow) else False,
    )
    if role is not None and not role.main:
        workers = [
            plugin.bulkhead_worker(client, task_queue, b, graceful_shutdown_timeout=grace)
            for b in role.bulkheads
        ]
        if role.shadow and any(r.shadow for r in deps.policy.roles.values()):
            workers.append(
                plugin.shadow_worker(client, task_queue, graceful_shutdown_timeout=grace)
            )
        return workers
    return [
        Worker(
            client,
            task_queue=task_queue,
            plugins=[plugin],
            max_concurrent_activities=MAIN_WORKER_ACTIVITY_SLOTS,
            graceful_shutdown_timeout=grace,
        )
    ]


async def run_until_stopped(
    workers: Sequence[Worker],
    stop: asyncio.Event,
    *,
    companions: Sequence[asyncio.Task[None]] = (),
) -> None:
    """Run all workers until ``stop`` is set, then shut them down gracefully.

    ``companions`` (e.g. the monitor supervisor) watch ``stop`` too; they are awaited
    before the workers drain, so nothing restarts the monitor meanwhile.
    """
    tasks = [asyncio.create_task(w.run()) for w in workers]
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
    stop.set()  # a worker that failed on its own stops the rest, companions included
    await asyncio.gather(*companions, return_exceptions=True)
    # In parallel: each worker's grace period runs at the same time, not one after another.
    await asyncio.gather(*(w.shutdown() for w in workers))
    # run() returns only once the plugin has drained its bulkhead workers (the model
    # calls): closing the stores or exiting before that would cut them off.
    await asyncio.gather(*tasks, return_exceptions=True)
    for t in tasks:
        if t in done and not t.cancelled() and t.exception():
            raise t.exception()  # type: ignore[misc]
    stopper.cancel()


def _fail(message: str, code: int) -> SystemExit:
    print(f"error: {message}", file=sys.stderr)
    return SystemExit(code)


async def main() -> None:
    from agent_failover.allocator import limit_arenas
    from agent_failover.logs import configure_logging, forward_core_logs
    from agent_failover.telemetry.sdk import export_sdk_metrics, sdk_metrics_buffer
    from agent_failover.telemetry.setup import setup_telemetry

    try:
        # First: the arena limit holds for threads started after it (telemetry, core).
        arenas = limit_arenas()
        configure_logging(os.environ.get("LOG_LEVEL", "INFO"))
        log.debug("malloc arenas: %s", arenas)
        # Before any client: OTEL_* decide traces and metrics (the plugin traces only then).
        telemetry = setup_telemetry("agent-failover-worker")
        buffer = sdk_metrics_buffer(telemetry)
        if not forward_core_logs(metrics=buffer):
            buffer = None  # the runtime was set before us: no SDK metrics to drain
        grace_s = shutdown_grace_s()
        dispatch_from_env()  # a typo exits here, before any connection
        sticky_queue_timeout_s()
    except ValueError as exc:
        raise _fail(str(exc), 2) from None
    if telemetry.metrics_port is not None:
        log.info("metrics: Prometheus scrape endpoint on port %d", telemetry.metrics_port)
    try:
        async with export_sdk_metrics(telemetry, buffer):
            await _serve(grace_s)
    finally:
        telemetry.shutdown()


async def _serve(grace_s: float) -> None:
    from agent_failover.allocator import freeze_startup_objects

    policy, policy_file = _policy_or_exit()
    role, codec = _role_and_codec_or_exit(policy)
    address = connect_config()["target_host"]
    task_queue = os.environ.get("FAILOVER_TASK_QUEUE", DEFAULT_TASK_QUEUE)
    try:
        client = await connect_client(codec=codec or False)
    except TemporalUnreachable:
        raise _fail(
            f"cannot reach Temporal at {address}: start one with `failover dev` "
            "or set TEMPORAL_ADDRESS",
            1,
        ) from None
    try:
        deps = await build_deps(policy, redis_url=os.environ.get("REDIS_URL"), codec=codec)
    except SetupError as exc:
        raise _fail(str(exc), 1) from None
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        workers = build_workers(
            client, deps, task_queue=task_queue, role=role, shutdown_grace_s=grace_s
        )
        supervisors = _supervisors(client, policy, role, task_queue, stop)
        log.info(
            "worker running on %s (task queue %s, policy %s version %s, serving %s, payload "
            "codec %s, store %s); Ctrl-C or SIGTERM drains in-flight activities for up to %gs",
            address,
            task_queue,
            policy_file,
            policy_version(policy),
            role.describe(),
            f"on (key {codec.active_key_id})" if codec else "off",
            deps.stores.backend,
            grace_s,
        )
        # Everything start-up built is alive for good: out of the collector's walks, so a
        # finished run's cycles are freed after a few runs (agent_failover.allocator).
        log.debug("frozen start-up objects: %d", freeze_startup_objects())
        await run_until_stopped(workers, stop, companions=supervisors)
        log.info("worker stopped")
    finally:
        await deps.close()


def _supervisors(
    client: Client, policy: PolicyConfig, role: WorkerRole, task_queue: str, stop: asyncio.Event
) -> list[asyncio.Task[None]]:
    """The monitor runs on the main queue; a worker serving it keeps it running."""
    if not role.main:
        return []
    return [
        asyncio.create_task(keep_monitor_running(client, policy, task_queue=task_queue, stop=stop))
    ]


def _policy_or_exit() -> tuple[PolicyConfig, Path]:
    """``FAILOVER_POLICY``'s policy (secrets masked in logs) and its path, or exit 2:
    never the demo policy by default."""
    from agent_failover.logs import redact_policy_secrets

    policy_file = os.environ.get("FAILOVER_POLICY", "").strip()
    if not policy_file:
        raise _fail(
            "no policy: set FAILOVER_POLICY to a policy file (`failover config schema` prints "
            "its format), or run `failover dev` for the bundled demo",
            2,
        )
    policy = load_policy_or_exit(policy_file)
    # This worker registers the bundled pipeline: a policy it cannot serve is refused
    # here, not at the first step of every run.
    unfit = pipeline_policy_errors(policy.roles)
    if unfit:
        problems = "; ".join(f"{where}: {msg}" for where, msg in unfit)
        raise _fail(f"invalid policy {policy_file} for the pipeline worker: {problems}", 2)
    redact_policy_secrets(policy)  # the keys' values are masked in every log line
    return policy, Path(policy_file).resolve()


def _role_and_codec_or_exit(policy: PolicyConfig) -> tuple[WorkerRole, AesGcmCodec | None]:
    """``FAILOVER_WORKER_ROLE`` and the payload codec, or exit 2 saying what is wrong."""
    try:
        return (
            parse_worker_role(os.environ.get("FAILOVER_WORKER_ROLE"), policy),
            codec_from_env(),
        )
    except (ValueError, CodecConfigError) as exc:
        raise _fail(f"invalid worker configuration: {exc}", 2) from None


def run() -> None:
    """Process entry: run, then exit without interpreter finalization.

    Everything is drained by then (workers shut down, HTTP client and stores closed), but
    the Temporal core's native threads can still hold Python references while the
    interpreter finalizes, which aborts the process (``PyGILState_Release``) and turns a
    clean SIGTERM into exit 134. Exiting directly keeps the exit code honest.
    """
    run_and_exit(main())


if __name__ == "__main__":
    run()
