"""``failover qualify --check``: the CI gate, run in-process without a Temporal server.

Each role's golden set runs against every route of its roster through the same
``qualify_item`` activity the ``QualifyWorkflow`` uses, executed here by Temporal's
in-process :class:`~temporalio.testing.ActivityEnvironment` (no server, no worker): the
route gets the same prompt variant, structured-output path and tools as in production,
transient errors are tried up to three times like the workflow's retry policy. Each role's
verdicts go through its quality gates; the command prints one table per role and exits
:data:`~agent_failover.cli.qualify.EXIT_UNQUALIFIED` when a role has no qualified fallback.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from pathlib import Path

from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agent_failover.activities.quality import (
    QUALITY_CONFIG_ERROR,
    QualifyItemInput,
    QualityActivities,
)
from agent_failover.providers.client import build_http_client
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.qualification import ItemResult, summarize_route
from agent_failover.workflows.qualify import (
    WORST_ITEMS_KEPT,
    FailedItem,
    QualifyInput,
    QualifyResult,
    RouteReport,
    qualify_result,
)

#: Attempts per (item, route), as the workflow's retry policy.
MAX_ATTEMPTS = 3
#: Longest wait between two attempts (a Retry-After beyond it is cut).
MAX_RETRY_WAIT_S = 10.0


async def check_role(policy: PolicyConfig, inp: QualifyInput) -> QualifyResult:
    """Run ``inp``'s golden set on its routes in this process and summarize it."""
    http = build_http_client(policy.endpoints.values())
    acts = QualityActivities(policy, http)
    gate = asyncio.Semaphore(inp.concurrency)
    pairs = [(item, route) for item in inp.items for route in inp.routes]

    async def one(item, route) -> ItemResult:
        async with gate:
            return await _run_item(acts, inp, item, route)

    try:
        results = await asyncio.gather(*(one(i, r) for i, r in pairs))
    finally:
        await http.aclose()
    return summarize(inp, results)


async def _run_item(acts: QualityActivities, inp: QualifyInput, item, route: str) -> ItemResult:
    """One (item, route) with the workflow's retries; a config error stops the check."""
    arg = QualifyItemInput(
        role=inp.role,
        route=route,
        item=item,
        scorer=inp.scorer,
        timeout_s=inp.item_timeout_s,
        max_attempts=MAX_ATTEMPTS,
    )
    for attempt in range(1, MAX_ATTEMPTS + 1):
        env = ActivityEnvironment()
        env.info = dataclasses.replace(ActivityEnvironment.default_info(), attempt=attempt)
        try:
            return await env.run(acts.qualify_item, arg)
        except ApplicationError as exc:
            if exc.type == QUALITY_CONFIG_ERROR or exc.non_retryable or attempt == MAX_ATTEMPTS:
                if exc.type == QUALITY_CONFIG_ERROR:
                    raise
                return ItemResult(item_id=item.id, route=route, ok=False, detail=str(exc)[:200])
            delay = exc.next_retry_delay.total_seconds() if exc.next_retry_delay else attempt
            await asyncio.sleep(min(delay, MAX_RETRY_WAIT_S))
    raise AssertionError("unreachable")  # pragma: no cover


def summarize(inp: QualifyInput, results: list[ItemResult]) -> QualifyResult:
    """The per-route verdicts, in the shape the workflow returns."""
    routes = {}
    for route in inp.routes:
        rows = [r for r in results if r.route == route]
        verdict = summarize_route(
            rows,
            model=inp.models.get(route, ""),
            min_quality=inp.min_quality,
            with_schema=inp.with_schema,
        )
        failed = [
            FailedItem(item_id=r.item_id, detail=(r.detail or r.error_class or "failed")[:120])
            for r in rows
            if not r.passed
        ][:WORST_ITEMS_KEPT]
        routes[route] = RouteReport(verdict=verdict, failed=failed)
    return qualify_result(inp, routes, runs=1, finished_at=datetime.now(UTC))


def roles_to_check(policy: PolicyConfig, role: str | None) -> list[str]:
    """``--role``, else every role of the policy."""
    return [role] if role else list(policy.roles)


def golden_for(flag: Path | None, default: Path) -> Path | None:
    """--golden for the one role checked, else the shipped set when there is one."""
    if flag is not None:
        return flag
    return default if default.exists() else None
