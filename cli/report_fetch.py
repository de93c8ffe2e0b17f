"""The IO of ``failover report``: runs from Temporal's visibility store and their results,
breaker figures from a worker's metrics endpoint."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import httpx
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus

from agent_failover.cli.errors import CliError
from agent_failover.cli.report import RunFacts
from agent_failover.resilience.contracts import Capability
from agent_failover.workflows.search_attributes import (
    DEGRADED,
    ESCALATION_STATE,
    FAILOVER_COUNT,
    WORST_TIER,
)

log = logging.getLogger(__name__)

#: Results fetched at once (each is one history read).
FETCH_CONCURRENCY = 8
#: Seconds a metrics endpoint gets to answer.
METRICS_TIMEOUT_S = 5.0


#: Our own bookkeeping runs: no user call in them, and the monitor's history is long.
NOT_REPORTED = ("HealthMonitorWorkflow", "QualifyWorkflow", "ShadowEvaluationWorkflow")


def visibility_query(
    since: timedelta, now: datetime | None = None, task_queue: str | None = None
) -> str:
    """Runs started in the window (on ``task_queue`` if given), but our bookkeeping runs."""
    start = (now or datetime.now(UTC)) - since
    parts = [f"StartTime > '{start.strftime('%Y-%m-%dT%H:%M:%SZ')}'"]
    parts += [f"WorkflowType != '{name}'" for name in NOT_REPORTED]
    if task_queue:
        parts.append(f"TaskQueue = '{task_queue}'")
    return " AND ".join(parts)


async def fetch_runs(
    client: Client, since: timedelta, limit: int, task_queue: str | None = None
) -> tuple[list[RunFacts], bool]:
    """The runs of the window that made failover calls (newest first, at most ``limit``
    read); True when cut at the limit."""
    executions: list[WorkflowExecution] = []
    query = visibility_query(since, task_queue=task_queue)
    async for wf in client.list_workflows(query, limit=limit + 1):
        executions.append(wf)
    truncated = len(executions) > limit
    sem = asyncio.Semaphore(FETCH_CONCURRENCY)

    async def one(wf: WorkflowExecution) -> RunFacts | None:
        async with sem:
            return await _facts(client, wf)

    found = await asyncio.gather(*(one(wf) for wf in executions[:limit]))
    return [f for f in found if f is not None], truncated


async def _facts(client: Client, wf: WorkflowExecution) -> RunFacts | None:
    """What the report needs of one run; None for a run that made no failover call."""
    sa = wf.typed_search_attributes
    status = wf.status.name.lower() if wf.status else "unknown"
    facts = RunFacts(
        workflow_id=wf.id,
        workflow_type=wf.workflow_type,
        status=status,
        worst_tier=sa.get(WORST_TIER),
        failover_count=sa.get(FAILOVER_COUNT) or 0,
        degraded=bool(sa.get(DEGRADED)),
        escalation=sa.get(ESCALATION_STATE) or "none",
    )
    if (
        wf.workflow_type == "AgentPipelineWorkflow"
        and wf.status is WorkflowExecutionStatus.COMPLETED
    ):
        from agent_failover.workflows.models import PipelineResult

        handle = client.get_workflow_handle(wf.id, run_id=wf.run_id, result_type=PipelineResult)
        try:
            result: PipelineResult = await handle.result()
        except (KeyError, ValueError, TypeError) as exc:  # undecodable payload: count, go on
            log.info("result of %s not readable: %s", wf.id, exc)
            facts.unreadable = True
            return facts
        facts.steps = [(s.step, s.output) for s in result.steps]
        facts.actions = [a.status.value for a in result.actions]
        return facts
    return await _from_history(client, wf, facts, carries_attributes=sa.get(WORST_TIER) is not None)


async def _from_history(
    client: Client, wf: WorkflowExecution, facts: RunFacts, *, carries_attributes: bool
) -> RunFacts | None:
    """``facts`` with the run's calls read from its history (and, for a run without the
    failover search attributes, its worst tier, failovers and degradation from them)."""
    from agent_failover.cli.report_history import calls_from_history

    handle = client.get_workflow_handle(wf.id, run_id=wf.run_id)
    closed = wf.status is not None and wf.status is not WorkflowExecutionStatus.RUNNING
    try:
        facts.calls = await calls_from_history(client, handle, closed)
    except (KeyError, ValueError, TypeError) as exc:  # undecodable payload: count, go on
        log.info("history of %s not readable: %s", wf.id, exc)
        facts.unreadable = True
        return facts if carries_attributes else None
    if not facts.calls:
        return facts if carries_attributes else None
    if not carries_attributes:
        facts.worst_tier = max(c.tier for c in facts.calls)
        facts.failover_count = sum(1 for c in facts.calls if c.tier > 0)
        facts.degraded = any(c.capability is not Capability.FULL for c in facts.calls)
    return facts


async def fetch_breakers(url: str) -> list[tuple[str, str, str]]:
    """(route, breaker state, mean time to restoration) from a worker's scrape endpoint."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        async with httpx.AsyncClient(timeout=METRICS_TIMEOUT_S) as http:
            resp = await http.get(url)
            resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise CliError(f"cannot read the metrics endpoint {url}: {exc}") from None
    states: dict[str, float] = {}
    restore: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            route = sample.labels.get("route")
            if route is None:
                continue
            if sample.name == "failover_breaker_state":
                states[route] = max(states.get(route, 0.0), sample.value)
            elif sample.name.startswith("failover_restoration_duration_seconds_"):
                pair = restore.setdefault(route, [0.0, 0.0])
                if sample.name.endswith("_sum"):
                    pair[0] += sample.value
                elif sample.name.endswith("_count"):
                    pair[1] += sample.value
    names = {0.0: "closed", 1.0: "half-open", 2.0: "open"}
    return [
        (
            route,
            names.get(states.get(route, -1.0), "–"),
            f"{restore[route][0] / restore[route][1]:.0f}s"
            if restore.get(route, [0, 0])[1]
            else "–",
        )
        for route in sorted(set(states) | set(restore))
    ]
