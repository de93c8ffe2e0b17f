"""What the operator commands ask Temporal, with every failure state named.

Each function either returns what the command prints or raises :class:`CliError` with
one line saying what failed and what to do. Anything that needs a worker checks first
that one polls the task queue (``DescribeTaskQueue``) and bounds every query and update
by :data:`ANSWER_TIMEOUT_S`, so ``status``, ``force``, ``resolve`` and ``run`` answer
within seconds when no worker is running instead of waiting forever.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from agent_failover.cli.errors import CliError, describe

#: How long a command waits for a worker to answer a query or an update.
ANSWER_TIMEOUT_S = 5.0
#: A poller seen this recently is a live worker (an idle one re-polls about every minute).
POLLER_FRESH_S = 90.0
POLLER_RECHECK_S = 0.25
NO_WORKER_HINT = "start one with `failover worker` (or run `failover dev` for a whole local stack)"
MONITOR_HINT = "start one with `failover worker`, or read the store: `failover status --from-store`"


def _timeout(seconds: float = ANSWER_TIMEOUT_S) -> timedelta:
    return timedelta(seconds=seconds)


async def live_pollers(client: Client, task_queue: str) -> int:
    """How many workers polled ``task_queue`` for workflow tasks in the last minute or so."""
    resp = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ),
        timeout=_timeout(),
    )
    now = time.time()
    return sum(
        1
        for p in resp.pollers
        if not p.HasField("last_access_time")
        or now - p.last_access_time.ToDatetime().timestamp() <= POLLER_FRESH_S
    )


async def require_worker(client: Client, task_queue: str, wait_s: float = ANSWER_TIMEOUT_S) -> None:
    """Raise unless some worker polls ``task_queue`` within ``wait_s`` (one just started
    may not have polled yet)."""
    deadline = time.monotonic() + wait_s
    while await live_pollers(client, task_queue) == 0:
        if time.monotonic() >= deadline:
            raise CliError(f"no worker is polling task queue {task_queue!r}: {NO_WORKER_HINT}")
        await asyncio.sleep(POLLER_RECHECK_S)


async def describe_workflow(client: Client, workflow_id: str) -> WorkflowExecutionDescription:
    """The workflow's latest run, or a one-line error naming the id and namespace."""
    try:
        return await client.get_workflow_handle(workflow_id).describe(rpc_timeout=_timeout())
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise CliError(
                f"no workflow {workflow_id!r} in namespace {client.namespace!r}: "
                "check the id (`failover run` prints it; the Web UI lists them)"
            ) from None
        raise


def closed_phrase(desc: WorkflowExecutionDescription) -> str:
    """'completed 2026-01-01T10:00:00Z' for a closed run."""
    status = desc.status.name.lower() if desc.status else "closed"
    when = desc.close_time.isoformat(timespec="seconds") if desc.close_time else ""
    return f"{status} {when}".strip()


def answer_timeout(what: str, task_queue: str) -> CliError:
    return CliError(
        f"no worker answered {what} within {ANSWER_TIMEOUT_S:g} s on task queue "
        f"{task_queue!r}: {NO_WORKER_HINT}"
    )


async def bounded_update(
    handle: WorkflowHandle, update: object, arg: object, result_type: type, task_queue: str
) -> object:
    """Run an update; a validator's refusal becomes ``refused: <reason>`` (exit 1)."""
    try:
        return await handle.execute_update(
            update,  # type: ignore[arg-type]
            arg,
            result_type=result_type,
            rpc_timeout=_timeout(ANSWER_TIMEOUT_S * 3),
        )
    except WorkflowUpdateFailedError as exc:
        raise CliError(describe(exc)) from None
    except RPCTimeoutOrCancelledError:
        raise answer_timeout("the update", task_queue) from None
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise CliError(f"workflow {handle.id!r} is no longer running") from None
        if exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise answer_timeout("the update", task_queue) from None
        raise


def is_running(desc: WorkflowExecutionDescription) -> bool:
    return desc.status is WorkflowExecutionStatus.RUNNING


# -- health monitor -------------------------------------------------------------------


MONITOR_QUERY = "WorkflowType = 'HealthMonitorWorkflow' AND ExecutionStatus = 'Running'"


async def running_monitor_queues(client: Client, limit: int = 20) -> list[str]:
    """The task queues whose health monitor runs in the client's namespace (one per
    deployment), sorted; empty when the visibility query is refused."""
    queues: set[str] = set()
    try:
        async for wf in client.list_workflows(MONITOR_QUERY, limit=limit):
            queues.add(wf.task_queue)
    except RPCError:
        return []
    return sorted(queues)


def _no_monitor(client: Client, task_queue: str, running: list[str]) -> CliError:
    wid = monitor_workflow_id_of(task_queue)
    where = f"task queue {task_queue!r} (no workflow {wid!r} in namespace {client.namespace!r})"
    if running:
        return CliError(
            f"the health monitor is not running for {where}; monitors run for task queue(s) "
            f"{', '.join(running)}: pass --task-queue {running[0]} or set FAILOVER_TASK_QUEUE "
            "as your worker does"
        )
    return CliError(
        f"the health monitor is not running for {where}: a worker with FailoverPlugin on "
        f"that queue starts it; {MONITOR_HINT} (the queue: --task-queue / FAILOVER_TASK_QUEUE)"
    )


def monitor_workflow_id_of(task_queue: str) -> str:
    from agent_failover.workflows.monitor import monitor_workflow_id

    return monitor_workflow_id(task_queue)


async def monitor_task_queue(client: Client, task_queue: str, explicit: bool) -> str:
    """``task_queue``, or, when nobody named one (no flag, variable or dev stack) and its
    monitor does not run, the only deployment whose monitor runs in the namespace."""
    if explicit:
        return task_queue
    try:
        await client.get_workflow_handle(monitor_workflow_id_of(task_queue)).describe(
            rpc_timeout=_timeout()
        )
        return task_queue
    except RPCError as exc:
        if exc.status is not RPCStatusCode.NOT_FOUND:
            raise
    running = await running_monitor_queues(client)
    return running[0] if len(running) == 1 else task_queue


async def monitor_handle(client: Client, task_queue: str) -> WorkflowHandle:
    """The running health monitor of ``task_queue`` with a worker to answer for it."""
    wid = monitor_workflow_id_of(task_queue)
    try:
        desc = await client.get_workflow_handle(wid).describe(rpc_timeout=_timeout())
    except RPCError as exc:
        if exc.status is not RPCStatusCode.NOT_FOUND:
            raise
        running = [q for q in await running_monitor_queues(client) if q != task_queue]
        raise _no_monitor(client, task_queue, running) from None
    if not is_running(desc):
        raise CliError(
            f"the health monitor is not running for task queue {task_queue!r} "
            f"({closed_phrase(desc)}): a worker restarts it within seconds; {MONITOR_HINT}"
        )
    await require_worker(client, task_queue)
    return client.get_workflow_handle(wid)


async def monitor_table(client: Client, task_queue: str):
    """The monitor's ``health`` query (the table `failover status` prints)."""
    from agent_failover.workflows.models import MonitorTable
    from agent_failover.workflows.monitor import HealthMonitorWorkflow

    handle = await monitor_handle(client, task_queue)
    try:
        return await handle.query(
            HealthMonitorWorkflow.health, result_type=MonitorTable, rpc_timeout=_timeout()
        )
    except RPCTimeoutOrCancelledError:
        raise answer_timeout("the health query", task_queue) from None
    except RPCError as exc:
        if exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise answer_timeout("the health query", task_queue) from None
        raise


async def override_route(client: Client, task_queue: str, route: str, state):
    """Force a route through the monitor's ``override_route`` update (validated there)."""
    from agent_failover.workflows.models import ForceRouteSignal, RouteOverride
    from agent_failover.workflows.monitor import HealthMonitorWorkflow

    handle = await monitor_handle(client, task_queue)
    return await bounded_update(
        handle,
        HealthMonitorWorkflow.override_route,
        ForceRouteSignal(route=route, state=state),
        RouteOverride,
        task_queue,
    )


# -- escalations ----------------------------------------------------------------------


async def resolve_escalation(client: Client, workflow_id: str, decision):
    """Send a decision to a paused workflow (the pipeline, or any workflow that calls
    ``escalate``) through its validated ``resolve`` update."""
    from agent_failover.workflows.escalate import RESOLVE_UPDATE
    from agent_failover.workflows.models import EscalationReceipt

    desc = await describe_workflow(client, workflow_id)
    if not is_running(desc):
        raise CliError(
            f"workflow {workflow_id!r} already finished ({closed_phrase(desc)}): "
            "there is nothing to resolve"
        )
    await require_worker(client, desc.task_queue)
    try:
        return await bounded_update(
            client.get_workflow_handle(workflow_id),
            RESOLVE_UPDATE,
            decision,
            EscalationReceipt,
            desc.task_queue,
        )
    except CliError as exc:
        if f"'{RESOLVE_UPDATE}' expected but not found" in exc.message:
            raise not_escalating(workflow_id, desc.workflow_type) from None
        raise


def not_escalating(workflow_id: str, workflow_type: str | None) -> CliError:
    """A workflow without the escalation handlers: it never escalated, or cannot."""
    return CliError(
        f"workflow {workflow_id!r} is a {workflow_type} that has never escalated: only the "
        "pipeline and workflows that call escalate() pause for a human"
    )
