"""``failover escalations list|show``: the runs waiting for a human.

``list`` asks Temporal's visibility store for the runs waiting for a human
(``EscalationState = "pending"``, still running: pipelines, and any workflow that calls
``escalate``), then asks each one's ``escalation`` query (when a worker polls its task
queue) for the reason, the blocked steps and when it opened; oldest first. ``show ID``
prints one run's serialized escalation state readably: reason, blocked steps, the state
the run kept, the decisions that apply and the exact ``failover resolve`` commands (the
decision itself goes through the run's ``resolve`` update). Every failure is a
:class:`CliError` saying what to do: the search attribute not registered, a workflow that
never escalated, an unknown or finished run, no worker to answer the query.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import quote

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowExecution,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from agent_failover.cli.errors import CliError
from agent_failover.cli.ops import (
    ANSWER_TIMEOUT_S,
    answer_timeout,
    closed_phrase,
    describe_workflow,
    is_running,
    live_pollers,
    not_escalating,
    require_worker,
)
from agent_failover.resilience.limits import clip
from agent_failover.resilience.notify import ALL_OPTIONS, SAGA_OPTIONS, resolve_command
from agent_failover.workflows.escalate import ESCALATION_QUERY
from agent_failover.workflows.models import EscalationStatus, PendingEscalation

PENDING_QUERY = "EscalationState = 'pending' AND ExecutionStatus = 'Running'"
REGISTER_HINT = (
    "register it once per namespace: `temporal operator search-attribute create --name "
    "EscalationState --type Keyword` (`failover dev` and the demo register it)"
)
#: Characters of a run's own state shown (``--json`` prints all of it).
STATE_CHARS = 2000
#: Status queries in flight at once while listing.
QUERY_CONCURRENCY = 8


@dataclass
class PendingRun:
    """One run waiting for a decision: visibility's facts, and its state when a worker answered."""

    workflow_id: str
    run_id: str
    task_queue: str
    started: datetime | None
    pending: PendingEscalation | None = None
    workflow_type: str = ""
    note: str = ""

    @property
    def since(self) -> float:
        """When it started waiting (unix seconds), else when the run started."""
        if self.pending is not None and self.pending.opened_at is not None:
            return self.pending.opened_at
        return self.started.timestamp() if self.started else 0.0


def visibility_error(exc: RPCError, namespace: str) -> CliError:
    """A refused visibility query as one line (the usual cause: the attribute is missing)."""
    text = str(exc)
    if exc.status is RPCStatusCode.INVALID_ARGUMENT and "EscalationState" in text:
        return CliError(
            f"namespace {namespace!r} has no EscalationState search attribute: {REGISTER_HINT}"
        )
    return CliError(f"the visibility query failed ({exc.status.name}): {text}")


async def list_pending(
    client: Client, limit: int, task_queue: str | None = None
) -> tuple[list[PendingRun], bool]:
    """Runs waiting for a human (on ``task_queue`` if given), oldest first; True when cut
    at ``limit``."""
    query = PENDING_QUERY + (f" AND TaskQueue = '{task_queue}'" if task_queue else "")
    found: list[WorkflowExecution] = []
    try:
        async for wf in client.list_workflows(query, limit=limit + 1):
            found.append(wf)
    except RPCError as exc:
        raise visibility_error(exc, client.namespace) from None
    rows = [
        PendingRun(wf.id, wf.run_id, wf.task_queue, wf.start_time, workflow_type=wf.workflow_type)
        for wf in found[:limit]
    ]
    await _fill_states(client, rows)
    return sorted(rows, key=lambda r: r.since), len(found) > limit


async def _fill_states(client: Client, rows: list[PendingRun]) -> None:
    queues = sorted({r.task_queue for r in rows})
    counts = await asyncio.gather(*(live_pollers(client, q) for q in queues))
    polled = dict(zip(queues, counts, strict=True))
    sem = asyncio.Semaphore(QUERY_CONCURRENCY)

    async def one(row: PendingRun) -> None:
        if not polled[row.task_queue]:
            row.note = f"no worker polls {row.task_queue!r}: details unavailable"
            return
        async with sem:
            try:
                status = await _status(client, row.workflow_id, row.task_queue)
            except CliError as exc:
                row.note = exc.message
                return
            except (RPCError, WorkflowQueryFailedError) as exc:
                # One run that cannot answer (closed meanwhile, a failing task) must not
                # hide the others.
                row.note = f"status query failed: {exc}"
                return
        row.pending = status.pending_escalation
        if row.pending is None:
            row.note = f"decided meanwhile (escalation {status.escalation.value})"

    await asyncio.gather(*(one(r) for r in rows))


async def _status(client: Client, workflow_id: str, task_queue: str) -> EscalationStatus:
    handle = client.get_workflow_handle(workflow_id)
    try:
        return await handle.query(
            ESCALATION_QUERY,
            result_type=EscalationStatus,
            rpc_timeout=timedelta(seconds=ANSWER_TIMEOUT_S),
        )
    except RPCTimeoutOrCancelledError:
        raise answer_timeout("the status query", task_queue) from None
    except RPCError as exc:
        if exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise answer_timeout("the status query", task_queue) from None
        raise


async def pending_escalation(
    client: Client, workflow_id: str
) -> tuple[PendingRun, EscalationStatus]:
    """One run's escalation state, or a CliError saying why there is none to show."""
    desc = await describe_workflow(client, workflow_id)
    if not is_running(desc):
        raise CliError(
            f"workflow {workflow_id!r} already finished ({closed_phrase(desc)}): "
            "no escalation is waiting"
        )
    await require_worker(client, desc.task_queue)
    try:
        status = await _status(client, workflow_id, desc.task_queue)
    except WorkflowQueryFailedError as exc:
        if f"'{ESCALATION_QUERY}' expected but not found" in str(exc):
            raise not_escalating(workflow_id, desc.workflow_type) from None
        raise
    if status.pending_escalation is None:
        phase = f", phase {status.phase}" if status.phase else ""
        raise CliError(
            f"workflow {workflow_id!r} is not waiting for a decision (escalation "
            f"{status.escalation.value}{phase}): nothing to resolve"
        )
    row = PendingRun(
        workflow_id,
        desc.run_id,
        desc.task_queue,
        desc.start_time,
        status.pending_escalation,
        workflow_type=desc.workflow_type or "",
    )
    return row, status


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _timeout_left(pe: PendingEscalation, now: float) -> str:
    if pe.opened_at is None or pe.timeout_s is None:
        return "-"
    action = pe.timeout_action.value if pe.timeout_action else "fail"
    return f"{_age(pe.opened_at + pe.timeout_s - now)} → {action}"


def options_for(pe: PendingEscalation) -> tuple[str, ...]:
    """The decisions that apply (``provide_output`` does not to a failed compensation)."""
    blocked = pe.blocked_steps
    return SAGA_OPTIONS if any(b.role == "saga" for b in blocked) else ALL_OPTIONS


def pending_table(rows: list[PendingRun], now: float | None = None) -> Table:
    """One row per waiting run, oldest first."""
    now = time.time() if now is None else now
    t = Table(title="Escalations waiting for a human (oldest first)", title_justify="left")
    for col in ("workflow id", "waiting", "blocked steps", "reason", "timeout in"):
        t.add_column(col, overflow="fold")
    for r in rows:
        pe = r.pending
        if pe is None:
            t.add_row(r.workflow_id, _age(now - r.since), "-", f"[dim]{r.note}[/]", "-")
            continue
        steps = ", ".join(b.step for b in pe.blocked_steps) or pe.step
        t.add_row(r.workflow_id, _age(now - r.since), steps, pe.reason, _timeout_left(pe, now))
    return t


def show_renderables(
    row: PendingRun, status: EscalationStatus, ui_base: str | None, namespace: str
) -> list[RenderableType]:
    """What ``escalations show`` prints: facts, blocked steps, decisions and commands."""
    pe = status.pending_escalation
    assert pe is not None
    now = time.time()
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    facts.add_row("workflow", f"{row.workflow_id} ({status.workflow_type}, run {row.run_id})")
    phase = f" · phase {status.phase}" if status.phase else ""
    facts.add_row("waiting", _age(now - row.since) + phase)
    facts.add_row("reason", pe.reason)
    facts.add_row("timeout in", _timeout_left(pe, now))
    facts.add_row("opened by", f"step {pe.step} (role {pe.role}), answered by {_answer(pe)}")
    facts.add_row("completed", ", ".join(pe.completed_steps) or "-")
    facts.add_row("pending", ", ".join(pe.pending_steps) or "-")
    if pe.compensation_log is not None:
        log = ", ".join(f"{e.effect.step}:{e.status.value}" for e in pe.compensation_log.entries)
        facts.add_row("side effects", log or "-")
    if pe.state is not None:
        facts.add_row("state", clip(json.dumps(pe.state, sort_keys=True), STATE_CHARS))
    blocked = Table(title="blocked steps", title_justify="left")
    for col in ("step", "role", "trigger", "confidence", "reason"):
        blocked.add_column(col, overflow="fold")
    for b in pe.blocked_steps:
        conf = "-" if b.confidence is None else f"{b.confidence:.2f}"
        blocked.add_row(b.step, b.role, b.trigger, conf, b.reason)
    commands = Text("resolve with one of:\n", style="bold")
    for action in options_for(pe):
        commands.append(f"  {resolve_command(row.workflow_id, action)}\n", style="none")
    parts: list[RenderableType] = [facts]
    if ui_base:
        # A plain string: the caller prints it unwrapped, so the link stays one piece.
        wid = quote(row.workflow_id, safe="")
        parts.append(
            f"Web UI: {ui_base}/namespaces/{namespace}/workflows/{wid}/{row.run_id}/history"
        )
    return [*parts, blocked, Group(commands)]


def _answer(pe: PendingEscalation) -> str:
    out = pe.output
    route = out.route or "-"
    return f"{route} (tier {out.tier}, {out.capability.value}, confidence {out.confidence:.2f})"
