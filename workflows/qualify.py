"""``QualifyWorkflow``: a role's golden set run against each candidate route.

One ``qualify_item`` activity per (item, route), at most ``concurrency`` at a time,
item-major (item 0 on every route, then item 1...), so progress is even and no route
sees more than a request or two at once (qualification measures a route idle; shadow
evaluation measures it under load). The ``progress`` query reports what is done.

Resumable: the workflow id is derived from the role, the golden set's hash, the routes,
the scorer and the threshold (:func:`qualify_workflow_id`), so re-running ``failover
qualify`` after the CLI died attaches to the same run, and a worker that dies mid-run
loses nothing: finished items are in the workflow's state (kept as compact
:class:`DoneItem` rows) and only items in flight are retried. Every
``continue_as_new_every`` finished items (or when Temporal suggests it) the run drains its
in-flight items and continues as new with the done rows in its input, so history stays
bounded at any golden-set size the input limits
allow. Inputs are checked in the first task; a bad one ends the run with the reason.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.quality import (
        QUALITY_CONFIG_ERROR,
        QualifyItemInput,
        QualityActivities,
    )
    from agent_failover.resilience.qualification import (
        GoldenItem,
        ItemResult,
        RouteQualification,
        golden_hash,
        summarize_route,
    )
    from agent_failover.resilience.quality import ScorerSpec
    from agent_failover.workflows.inputs import workflow_input

#: Largest golden set (JSON characters) one run carries in its input.
MAX_GOLDEN_INPUT_CHARS = 512_000
#: Most (item, route) pairs one qualification may hold: its done rows stay ~600 kB.
MAX_WORK_ITEMS = 10_000
#: Finished items per run before it continues as new.
CONTINUE_AS_NEW_EVERY = 500
#: Per route, the failed items listed in the result (ids and why).
WORST_ITEMS_KEPT = 5
#: Error type of an input the workflow refuses (non-retryable).
INVALID_QUALIFY_INPUT = "invalid_qualify_input"
ITEM_GRACE_S = 10.0


class DoneItem(BaseModel):
    """A finished (item, route) pair, compact: it is carried across continue-as-new."""

    i: int = Field(ge=0, description="item index")
    r: int = Field(ge=0, description="route index")
    ok: bool
    s: float = Field(ge=0.0, le=1.0, description="score")
    p: bool = Field(description="passed")
    sc: bool | None = Field(default=None, description="schema compliant")
    ms: float | None = Field(default=None, description="latency")
    why: str = Field(default="", max_length=120, description="kept for failed items only")


class QualifyInput(BaseModel):
    role: str
    golden_set: str = Field(description="name of the golden set (file name), for the lock")
    items: list[GoldenItem] = Field(min_length=1)
    routes: list[str] = Field(min_length=1)
    models: dict[str, str] = Field(default_factory=dict)
    scorer: ScorerSpec
    min_quality: float = Field(ge=0.0, le=1.0)
    with_schema: bool = False
    concurrency: int = Field(default=4, ge=1, le=64)
    item_timeout_s: float = Field(default=30.0, gt=0, le=600)
    continue_as_new_every: int = Field(default=CONTINUE_AS_NEW_EVERY, ge=1, le=5_000)
    done: list[DoneItem] = Field(default_factory=list)
    runs: int = Field(default=0, ge=0, description="continue-as-new count")


class QualifyProgress(BaseModel):
    total: int
    done: int
    running: int
    errors: int
    by_route: dict[str, int]
    runs: int


class FailedItem(BaseModel):
    item_id: str
    detail: str


class RouteReport(BaseModel):
    verdict: RouteQualification
    failed: list[FailedItem] = Field(default_factory=list)


class QualifyResult(BaseModel):
    role: str
    golden_set: str
    golden_hash: str
    min_quality: float
    scorer: str
    routes: dict[str, RouteReport]
    items: int
    runs: int
    finished_at: str = Field(description="UTC time the run finished, ISO 8601 (workflow clock)")


def qualify_workflow_id(inp: QualifyInput) -> str:
    """Deterministic id: the same role, golden set, routes, scorer and threshold resume
    (or reuse) the same run; changing any of them starts another."""
    setup = json.dumps(
        [inp.routes, inp.min_quality, inp.scorer.model_dump(mode="json")], sort_keys=True
    )
    tag = hashlib.sha256(setup.encode()).hexdigest()[:8]
    return f"qualify-{inp.role}-{golden_hash(inp.items)}-{tag}"


def _check(inp: QualifyInput) -> None:
    problems = []
    if len(set(inp.routes)) != len(inp.routes):
        problems.append("routes: a route is listed twice")
    if len({i.id for i in inp.items}) != len(inp.items):
        problems.append("items: golden item ids must be unique")
    if len(inp.items) * len(inp.routes) > MAX_WORK_ITEMS:
        problems.append(
            f"{len(inp.items)} items x {len(inp.routes)} routes is above {MAX_WORK_ITEMS}: "
            "split the golden set or qualify fewer routes at a time"
        )
    size = sum(len(i.model_dump_json()) for i in inp.items)
    if size > MAX_GOLDEN_INPUT_CHARS:
        problems.append(f"golden set of {size} chars is above {MAX_GOLDEN_INPUT_CHARS}: split it")
    if problems:
        raise ApplicationError("; ".join(problems), type=INVALID_QUALIFY_INPUT, non_retryable=True)


@workflow.defn(name="QualifyWorkflow")
class QualifyWorkflow:
    @workflow.init
    def __init__(self, *args: Any) -> None:
        self._inp: QualifyInput | None = None
        self._done: dict[tuple[int, int], DoneItem] = {}
        self._running = 0

    @workflow.run
    async def run(self, *args: Any) -> QualifyResult:
        # Untyped on purpose (see workflows.inputs): a bad start fails the run at once.
        inp = workflow_input(QualifyInput, args, workflow_name="QualifyWorkflow")
        _check(inp)
        self._inp = inp
        self._done = {(d.i, d.r): d for d in inp.done}
        todo = [
            (i, r)
            for i in range(len(inp.items))
            for r in range(len(inp.routes))
            if (i, r) not in self._done
        ]
        finished = await self._run_batch(inp, todo)
        if finished < len(todo):
            workflow.continue_as_new(
                inp.model_copy(update={"done": list(self._done.values()), "runs": inp.runs + 1})
            )
        return self._result(inp)

    async def _run_batch(self, inp: QualifyInput, todo: list[tuple[int, int]]) -> int:
        """Run ``todo`` with bounded concurrency; stop early (drained) to continue as new."""
        pending: dict[Any, tuple[int, int]] = {}
        started = finished = 0
        while started < len(todo) or pending:
            stop = (
                finished >= inp.continue_as_new_every
                or workflow.info().is_continue_as_new_suggested()
            )
            while not stop and started < len(todo) and len(pending) < inp.concurrency:
                i, r = todo[started]
                pending[self._start(inp, i, r)] = (i, r)
                started += 1
            if not pending:
                break
            self._running = len(pending)
            done, _ = await workflow.wait(list(pending), return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                i, r = pending.pop(task)
                self._done[(i, r)] = _compact(i, r, _item_result(inp, i, r, task))
                finished += 1
        self._running = 0
        return finished

    def _start(self, inp: QualifyInput, i: int, r: int) -> Any:
        item, route = inp.items[i], inp.routes[r]
        return workflow.start_activity_method(
            QualityActivities.qualify_item,
            QualifyItemInput(
                role=inp.role,
                route=route,
                item=item,
                scorer=inp.scorer,
                timeout_s=inp.item_timeout_s,
                max_attempts=3,
            ),
            # Two calls at most (the answer, a judge) plus slack.
            start_to_close_timeout=timedelta(seconds=2 * inp.item_timeout_s + ITEM_GRACE_S),
            retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)),
            summary=f"{item.id} on {route}",
        )

    def _result(self, inp: QualifyInput) -> QualifyResult:
        routes: dict[str, RouteReport] = {}
        for r, route in enumerate(inp.routes):
            rows = [self._done[(i, r)] for i in range(len(inp.items)) if (i, r) in self._done]
            results = [_expand(inp, d) for d in rows]
            verdict = summarize_route(
                results,
                model=inp.models.get(route, ""),
                min_quality=inp.min_quality,
                with_schema=inp.with_schema,
            )
            failed = [FailedItem(item_id=inp.items[d.i].id, detail=d.why) for d in rows if not d.p][
                :WORST_ITEMS_KEPT
            ]
            routes[route] = RouteReport(verdict=verdict, failed=failed)
        return qualify_result(inp, routes, runs=inp.runs + 1, finished_at=workflow.now())

    @workflow.query(name="progress")
    def progress(self) -> QualifyProgress:
        inp = self._inp
        if inp is None:
            return QualifyProgress(total=0, done=0, running=0, errors=0, by_route={}, runs=0)
        by_route = {route: 0 for route in inp.routes}
        for _, r in self._done:
            by_route[inp.routes[r]] += 1
        return QualifyProgress(
            total=len(inp.items) * len(inp.routes),
            done=len(self._done),
            running=self._running,
            errors=sum(1 for d in self._done.values() if not d.ok),
            by_route=by_route,
            runs=inp.runs + 1,
        )


def qualify_result(
    inp: QualifyInput, routes: dict[str, RouteReport], *, runs: int, finished_at: datetime
) -> QualifyResult:
    """The result of a qualification of ``inp``'s golden set over ``routes`` (the workflow's
    and the in-process ``failover qualify --check``'s)."""
    return QualifyResult(
        role=inp.role,
        golden_set=inp.golden_set,
        golden_hash=golden_hash(inp.items),
        min_quality=inp.min_quality,
        scorer="+".join(sorted({(i.scorer or inp.scorer).kind for i in inp.items})),
        routes=routes,
        items=len(inp.items),
        runs=runs,
        finished_at=finished_at.isoformat(timespec="seconds"),
    )


def _item_result(inp: QualifyInput, i: int, r: int, task: Any) -> ItemResult:
    """The activity's result; an item that failed for good is a failed item, except a
    configuration problem, which ends the run saying what to fix."""
    try:
        return task.result()
    except ActivityError as exc:
        cause = exc.cause
        if isinstance(cause, ApplicationError) and cause.type == QUALITY_CONFIG_ERROR:
            raise ApplicationError(
                cause.message, type=QUALITY_CONFIG_ERROR, non_retryable=True
            ) from None
        why = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
        return ItemResult(item_id=inp.items[i].id, route=inp.routes[r], ok=False, detail=why[:200])


def _compact(i: int, r: int, res: ItemResult) -> DoneItem:
    why = "" if res.passed else (res.detail or res.error_class or "failed")[:120]
    return DoneItem(
        i=i, r=r, ok=res.ok, s=res.score, p=res.passed, sc=res.schema_ok, ms=res.latency_ms, why=why
    )


def _expand(inp: QualifyInput, d: DoneItem) -> ItemResult:
    return ItemResult(
        item_id=inp.items[d.i].id,
        route=inp.routes[d.r],
        ok=d.ok,
        latency_ms=d.ms,
        schema_ok=d.sc,
        score=d.s,
        passed=d.p,
    )
