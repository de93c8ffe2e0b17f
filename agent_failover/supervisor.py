"""What runs beside a worker that :class:`~agent_failover.plugin.FailoverPlugin` configured.

The plugin configures (converter, sandbox, workflows, activities); the process lifecycles
live here, called from its ``run_worker``: the stores, connected when the first worker runs
and closed after the last stops (:class:`SharedStores`); one extra worker per bulkhead
queue and one for the shadow queue (:func:`bulkhead_workers`, :func:`shadow_worker`); the
policy versions this worker serves, published and then kept complete
(:func:`publish_policy_versions`); and the keeper that starts the health monitor once per
deployment and again whenever it ends (:func:`keep_monitor_running`, also run by
``failover worker`` and ``failover dev``). :func:`run_beside` runs a worker with all of
them and stops them in order when it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal

from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.converter import PayloadCodec
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Interceptor, Worker, WorkerConfig, WorkflowRunner

from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import llm_task_queue
from agent_failover.activities.policy_registry import policy_ref
from agent_failover.activities.policy_versions import keep_fetching_missing, load_versions
from agent_failover.resilience.config import PolicyConfig
from agent_failover.stores.cache import DEFAULT_NAMESPACE, MemoryResponseCache
from agent_failover.stores.factory import IfUnreachable, Stores, connect_stores, unreachable_mode
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.stores.policies import DirectoryPolicyStore, PolicyVersionStore
from agent_failover.workflows.models import MonitorInput, MonitorPolicy, MonitorTable
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id
from agent_failover.workflows.shadow import ShadowEvaluationWorkflow, shadow_task_queue

# The worker process's logger: its lines read as the worker's, wherever they come from.
log = logging.getLogger("agent_failover.worker")

#: The deployment's task queue unless ``FAILOVER_TASK_QUEUE`` says otherwise.
DEFAULT_TASK_QUEUE = "agent-failover"
#: How often a worker checks that the health monitor still runs (and restarts it).
MONITOR_CHECK_S = 5.0
#: Longest pause between restarts of a monitor that keeps ending at once.
MONITOR_RESTART_MAX_S = 60.0
#: A monitor run that lasted this long resets the restart back-off.
MONITOR_STABLE_S = 60.0
#: How long a workflow task waits on the sticky queue of the worker that ran the workflow
#: before any worker may take it. A SIGKILLed worker leaves its runs waiting this long
#: for their next step (after a model call's answer, say); the SDK's 10 s default used up
#: most of a critical step's budget. The cost of a short one: a busy worker that polls
#: its sticky queue late sends the task to another worker, which replays the history.
DEFAULT_STICKY_QUEUE_TIMEOUT = timedelta(seconds=2)
#: The SDK's own default, which a worker configured by hand keeps unless it set another.
SDK_STICKY_QUEUE_TIMEOUT: timedelta = (
    inspect.signature(Worker.__init__).parameters["sticky_queue_schedule_to_start_timeout"].default
)


class SharedStores:
    """The stores every worker of one plugin shares.

    ``stores`` is ``"redis"`` (``redis_url``, else ``REDIS_URL``; when it does not answer,
    ``if_unreachable`` decides: see :func:`connect_stores`), ``"embedded"`` (the same, but
    an embedded Redis when no URL is set and the local default does not answer: dev and
    demo only), ``"memory"`` or a connected :class:`Stores` (the caller's: never closed
    here). ``namespace`` None: ``FAILOVER_REDIS_NAMESPACE``, else ``failover``. Connected
    on first use; closed once the last worker :meth:`held` them has stopped.
    """

    def __init__(
        self,
        stores: Stores | Literal["redis", "memory", "embedded"],
        redis_url: str | None,
        namespace: str | None,
        if_unreachable: IfUnreachable | None = None,
    ) -> None:
        if not isinstance(stores, Stores) and stores not in ("redis", "memory", "embedded"):
            raise ValueError(
                f"stores must be 'redis', 'embedded', 'memory' or a Stores; got {stores!r}"
            )
        self._arg = stores
        self._redis_url = redis_url
        self._namespace = namespace or os.environ.get("FAILOVER_REDIS_NAMESPACE", DEFAULT_NAMESPACE)
        self._if_unreachable = unreachable_mode(if_unreachable)
        self.current: Stores | None = stores if isinstance(stores, Stores) else None
        self._users = 0

    async def connect(self, codec: PayloadCodec | None) -> Stores:
        """The stores, connected now if not yet (``codec`` seals the cached answers)."""
        if self.current is None:
            if self._arg == "memory":
                self.current = Stores(MemoryHealthStore(), MemoryResponseCache(), "memory")
            else:
                self.current = await connect_stores(
                    self._redis_url,
                    namespace=self._namespace,
                    codec=codec,
                    embedded_fallback=self._arg == "embedded",
                    if_unreachable=self._if_unreachable,
                )
        return self.current

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Count one running worker; the last one out closes the stores connected here."""
        self._users += 1
        try:
            yield
        finally:
            self._users -= 1
            if self._users == 0 and self.current is not None and not isinstance(self._arg, Stores):
                await self.current.close()
                self.current = None


async def publish_policy_versions(acts: LLMActivitySet, stores: Stores) -> PolicyVersionStore:
    """Write the policy subsets this worker serves to the policy store and load every
    stored version (see :mod:`stores.policies`): the stores' own (Redis), else the
    directory ``FAILOVER_POLICY_DIR``. Returns the store."""
    if stores.policies is None:
        stores.policies = DirectoryPolicyStore.from_env()
    acts.policy_versions.bind(stores.policies)
    await acts.publish_policies()
    await load_versions(stores.policies)
    return stores.policies


def checked_sticky_timeout(timeout: timedelta | None) -> timedelta | None:
    """``timeout`` if it is positive or None; ``ValueError`` naming it otherwise."""
    if timeout is not None and timeout <= timedelta():
        raise ValueError(f"sticky_queue_timeout must be a positive duration, got {timeout}")
    return timeout


def bound_sticky_queue(config: WorkerConfig, timeout: timedelta | None) -> None:
    """Give a worker left at the SDK's sticky-queue default ``timeout`` (in place); a value
    the worker set itself is kept, and None keeps the SDK's."""
    current = config.get("sticky_queue_schedule_to_start_timeout", SDK_STICKY_QUEUE_TIMEOUT)
    if timeout is not None and current == SDK_STICKY_QUEUE_TIMEOUT:
        config["sticky_queue_schedule_to_start_timeout"] = timeout


def bulkhead_workers(
    client: Client,
    task_queue: str,
    activities: Sequence[Callable[..., Any]],
    slots: Mapping[str, int],
    *,
    internal: set[str],
    grace: timedelta | None,
    interceptors: Sequence[Interceptor],
) -> list[Worker]:
    """One worker per bulkhead of ``slots`` (name -> its activity slots) on
    ``<task_queue>-llm-<bulkhead>``, serving the model calls ``activities``.

    Each queue joins ``internal`` before its worker exists: a plugin the client carries
    configures the worker as it is built, and must leave our own workers alone.
    """
    workers = []
    for bulkhead, limit in slots.items():
        queue = llm_task_queue(task_queue, bulkhead)
        internal.add(queue)
        workers.append(
            Worker(
                client,
                task_queue=queue,
                activities=list(activities),
                max_concurrent_activities=limit,
                graceful_shutdown_timeout=grace or timedelta(),
                # Model calls are where the attempt spans' children run: traced too.
                interceptors=list(interceptors),
            )
        )
    return workers


def shadow_worker(
    client: Client,
    task_queue: str,
    activities: Sequence[Callable[..., Any]],
    slots: int,
    *,
    internal: set[str],
    runner: WorkflowRunner,
    grace: timedelta | None,
    interceptors: Sequence[Interceptor],
    sticky: timedelta | None = None,
) -> Worker:
    """The worker of ``<task_queue>-shadow`` beside the main one (internal, like a bulkhead):
    the shadow evaluations, on a few slots of their own."""
    queue = shadow_task_queue(task_queue)
    internal.add(queue)
    return Worker(
        client,
        task_queue=queue,
        workflows=[ShadowEvaluationWorkflow],
        activities=list(activities),
        max_concurrent_activities=slots,
        workflow_runner=runner,
        graceful_shutdown_timeout=grace or timedelta(),
        interceptors=list(interceptors),
        sticky_queue_schedule_to_start_timeout=sticky or SDK_STICKY_QUEUE_TIMEOUT,
    )


async def run_beside(
    run: Callable[[], Awaitable[None]],
    companions: Sequence[Worker],
    policies: PolicyVersionStore,
    monitor: Callable[..., Awaitable[None]] | None = None,
) -> None:
    """Run ``run()`` (the worker) with ``companions`` (its bulkhead and shadow workers), the
    policy-version fetcher and, if given, the ``monitor`` keeper beside it (called with
    ``stop=``, an event set when the worker stops: :func:`keep_monitor_running`).

    When the worker stops: the keeper first (it returns after its current short call),
    then the companions drain for their own grace period, then the fetcher ends.
    """
    tasks = [asyncio.create_task(w.run()) for w in companions]
    stop = asyncio.Event()
    tasks.append(asyncio.create_task(keep_fetching_missing(policies, stop)))
    keeper = asyncio.create_task(monitor(stop=stop)) if monitor is not None else None
    try:
        await run()
    finally:
        stop.set()
        if keeper is not None:
            await asyncio.gather(keeper, return_exceptions=True)
        await asyncio.gather(*(w.shutdown() for w in companions), return_exceptions=True)
        await asyncio.gather(*tasks, return_exceptions=True)


def monitor_policy(policy: PolicyConfig, since: float | None = None) -> MonitorPolicy:
    """What the health monitor takes from ``policy``: every endpoint, the probe cadence
    and the policy's ref; ``since`` (default now) is when the worker serving it started."""
    return MonitorPolicy(
        routes=sorted(policy.endpoints),
        interval_s=policy.probes.interval_s,
        half_open_interval_s=policy.probes.half_open_interval(),
        policy_ref=policy_ref(policy),
        since=time.time() if since is None else since,
    )


async def ensure_monitor(
    client: Client,
    policy: PolicyConfig,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    since: float | None = None,
) -> WorkflowHandle:
    """Start the health monitor unless it already runs (idempotent across workers).

    A monitor already running keeps its policy: :func:`follow_policy` brings it to this
    one (:func:`keep_monitor_running` does both).
    """
    mp = monitor_policy(policy, since)
    return await client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(routes=mp.routes).following(mp),
        id=monitor_workflow_id(task_queue),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


async def follow_policy(client: Client, wid: str, mp: MonitorPolicy) -> bool:
    """Bring the running monitor ``wid`` to ``mp`` unless it follows it or a newer policy
    already; False when the monitor could not be asked (try again later).

    The ``follow_policy`` update starts a round with the new routes at once, so a route
    a rollout added is probed within one probe interval of its first worker's start.

    The update is sent straight away, without asking the monitor first: its validator
    refuses this policy if the monitor follows it already or a worker started later
    (nothing reaches history). A query first cost a second trip through a workflow task,
    and while the monitor's task was held (a worker that stopped mid-task, a replay on the
    new worker) the query waited behind it and the update only went out after it.
    """
    handle = client.get_workflow_handle(wid)
    timeout = timedelta(seconds=MONITOR_CHECK_S)
    try:
        await handle.execute_update(
            HealthMonitorWorkflow.follow_policy, mp, result_type=MonitorTable, rpc_timeout=timeout
        )
    except WorkflowUpdateFailedError as exc:
        # Refused by its validator (this policy already, or a newer worker's): nothing to do.
        log.info("health monitor %s kept its policy: %s", wid, exc.cause or exc)
        return True
    except (RPCError, RPCTimeoutOrCancelledError) as exc:
        # An update that outlived its RPC timeout raises RPCTimeoutOrCancelledError (not an
        # RPCError): uncaught, it ended the keeper and the monitor was never restarted.
        log.warning("could not bring the health monitor %s to policy %s: %s", wid, mp.policy_ref,
                    getattr(exc, "message", None) or type(exc).__name__)  # fmt: skip
        return False
    log.info("health monitor %s follows policy %s (%d routes)", wid, mp.policy_ref, len(mp.routes))
    return True


async def keep_monitor_running(
    client: Client,
    policy: PolicyConfig,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    stop: asyncio.Event | None = None,
    check_every_s: float = MONITOR_CHECK_S,
) -> None:
    """Start the health monitor, and start it again whenever it has ended, until ``stop``;
    bring each run it finds to this worker's policy (:func:`follow_policy`).

    Every worker runs this; starting is idempotent (the id is per task queue and a running
    monitor is reused), so several workers restart one monitor, once. The worker started
    last brings the monitor to its policy (an older worker's policy is refused), so a
    rollout's new routes are probed. It checks with short ``describe`` calls rather than
    a long poll on the result, so when ``stop`` is set it returns after at most one short
    call and no RPC is left in flight at shutdown (a cancelled long poll can still be
    completing while the interpreter exits). A monitor that keeps ending at once (a
    policy or code bug) is restarted with a growing pause, and an unreachable Temporal is
    waited out.
    """
    stop = stop or asyncio.Event()
    wid = monitor_workflow_id(task_queue)
    mp = monitor_policy(policy)
    pause = check_every_s
    started_at: float | None = None
    followed: str | None = None  # the run last brought to this policy
    while not stop.is_set():
        state, run_id = await _monitor_state(client, wid)
        if state is not None and state != "RUNNING":
            if state != "absent":
                log.warning("health monitor %s ended (%s); starting it again", wid, state.lower())
            quick = started_at is not None and time.monotonic() - started_at < MONITOR_STABLE_S
            pause = min(pause * 2, MONITOR_RESTART_MAX_S) if quick else check_every_s
            try:
                await ensure_monitor(client, policy, task_queue=task_queue, since=mp.since)
                started_at = time.monotonic()
            except RPCError as exc:
                log.warning("could not start the health monitor %s: %s", wid, exc.message)
        elif state == "RUNNING" and run_id != followed and await follow_policy(client, wid, mp):
            followed = run_id
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), pause)


async def _monitor_state(client: Client, wid: str) -> tuple[str | None, str | None]:
    """('RUNNING' / another status name / 'absent', or None when Temporal did not answer;
    the run id)."""
    try:
        desc = await client.get_workflow_handle(wid).describe(
            rpc_timeout=timedelta(seconds=MONITOR_CHECK_S)
        )
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return "absent", None
        log.warning("cannot reach the health monitor %s (%s); retrying", wid, exc.message)
        return None, None
    return (desc.status.name if desc.status else None), desc.run_id
