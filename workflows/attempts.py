"""One attempt of a resilient call: its request, its ``call_model`` activity, its outcome.

An attempt's request is the call's, summarized and triaged when the route's window needs
it, continued from a partial answer (prefill) where the route allows, and given the
role's prompt variant and structured-output path for that route. It runs as one
``call_model`` activity (with one same-route retry by Temporal), on the bulkhead's queue
again when eager dispatch met a full bulkhead; :func:`collect` turns what the activity
returned or raised into an :class:`AttemptResult`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.failures import BULKHEAD_FULL
    from agent_failover.activities.first_models import (
        ATTEMPT_GRACE,
        SAME_ROUTE_BACKOFF_S,
        attempt_input,
    )
    from agent_failover.activities.model_call import ModelCallActivities
    from agent_failover.activities.models import CallModelResult
    from agent_failover.resilience.config import RolePolicy
    from agent_failover.resilience.contracts import AttemptRecord, ReasonCode
    from agent_failover.resilience.first_attempt import caches_answer, output_schema_for, prompted
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.outcomes import ATTEMPT_TIMEOUT
    from agent_failover.resilience.planner import PlannedAttempt
    from agent_failover.resilience.prompts import CALLER_VARIANT
    from agent_failover.resilience.triage import triage
    from agent_failover.workflows import observe
    from agent_failover.workflows.call import AttemptResult, Call, Prepared
    from agent_failover.workflows.summarize import summarize_context

#: Extra time Temporal allows beyond the activity's own budget before it times it out.
ACTIVITY_GRACE = ATTEMPT_GRACE
#: Attempts Temporal may make on one route: the first, plus one same-route retry for a
#: RETRY-class error (a 500, after backoff) or a 429 whose Retry-After is short enough to
#: wait out (after exactly Retry-After: ``next_retry_delay``, a durable server timer).
SAME_ROUTE_ATTEMPTS = 2
#: Heartbeat timeout for model calls: hedge cancellation is delivered on heartbeats, and an
#: attempt whose worker died (SIGKILL, OOM) is known lost this long after its last beat.
CALL_HEARTBEAT_TIMEOUT = timedelta(seconds=5)
#: What a Temporal timeout of an attempt says about where the time went (the record's note).
LOST_ATTEMPT_NOTES = {
    TimeoutType.SCHEDULE_TO_START: "no worker started it within its timeout",
    TimeoutType.HEARTBEAT: "its worker stopped heartbeating (lost mid-call)",
}

#: A started attempt: its activity, whether it continues a partial answer, when it began.
Started = tuple[asyncio.Task[Any], bool, float]


async def summarize_before_triage(
    call: Call, role: RolePolicy, first: PlannedAttempt, hedge: PlannedAttempt | None, started: Any
) -> None:
    """Once per call, when an attempt needs triage and the role opts in: summarize what
    triage would drop (its own activity), for every attempt that needs triage."""
    need = [a for a in (first, hedge) if a and a.needs_triage and a.target_input_tokens]
    if call.summary_tried or not need or not role.summarize.enabled:
        return
    call.summary_tried = True
    left_ms = role.total_budget_ms - (workflow.now() - started).total_seconds() * 1000
    out = await summarize_context(
        role,
        call.ctx.policy,
        call.ctx.snapshot,
        call.request,
        target_tokens=min(a.target_input_tokens or 0 for a in need),
        time_left_ms=left_ms,
        # On the bulkhead's own queue: it waits for a slot rather than meeting a full one.
        task_queue=call.ctx.overflow_queue or call.ctx.task_queue,
        exclude=sorted({*call.state.excluded, first.route, *([hedge.route] if hedge else [])}),
    )
    if out is not None:
        call.summarized, call.summary_note, call.summary_cost = (
            out.request,
            out.note,
            out.cost_usd,
        )


def prepare(call: Call, attempt: PlannedAttempt) -> tuple[ChatRequest, bool]:
    """The attempt's request (summarized, triaged, prefilled, prompted for its route) and
    whether it continues a partial answer; what was chosen goes in ``call.prepared``."""
    request = call.request
    notes: list[str] = []
    if attempt.needs_triage and attempt.target_input_tokens:
        if call.summary_note:
            notes.append(call.summary_note)
        if call.summarized is not None:
            request = call.summarized
            call.state.add_reason(ReasonCode.CONTEXT_SUMMARIZED)
        tri = triage(request, attempt.target_input_tokens)
        request = tri.request
        if tri.truncated:
            call.state.add_reason(ReasonCode.CONTEXT_TRUNCATED)
    ep = call.ctx.policy.endpoints[attempt.route]
    use_prefill = bool(
        call.state.prefill_text
        and not call.state.prefill_blocked
        and ep.capabilities.assistant_prefill
        and request.json_schema is None
    )
    if use_prefill:
        request = request.model_copy(update={"prefill": call.state.prefill_text})
    request, choice, path = prompted(request, call.ctx.role, ep, call.own_system)
    if choice is not None and choice.note:
        notes.append(choice.note)
    variant = CALLER_VARIANT if choice is None else choice.variant
    call.prepared[attempt.route] = Prepared(variant, path, notes)
    return request, use_prefill


def start(call: Call, attempt: PlannedAttempt, tries: int = SAME_ROUTE_ATTEMPTS) -> Started:
    """Schedule the attempt's ``call_model`` activity (overflowing to the bulkhead's queue
    under eager dispatch) with ``tries`` on its route; collect it with :func:`collect`."""
    request, used_prefill = prepare(call, attempt)
    timeout = timedelta(milliseconds=attempt.timeout_ms)
    now = workflow.now().timestamp()
    # Temporal's own retry of a RETRY-class error must still end inside the role's budget.
    left_ms = call.ctx.role.total_budget_ms - (now - call.started_at) * 1000
    overall = max(timeout, timedelta(milliseconds=left_ms))
    token = observe.attempt_started(call, attempt, request.max_tokens)
    inp = attempt_input(
        call.role_name,
        call.ctx.role,
        attempt,
        request,
        output_schema=_output_schema(call, attempt),
        now=now,
        started_at=call.started_at,
        cache_key=_cache_key(call, attempt),
        lease=call.hand_lease(),
    )

    def schedule(queue: str, summary: str = "") -> asyncio.Task[Any]:
        return workflow.start_activity_method(
            ModelCallActivities.call_model,
            inp,
            task_queue=queue,
            # Per attempt: one no worker picks up (its worker gone, its queue unserved)
            # fails within its own timeout, and the call moves on, instead of holding
            # the rest of the role's budget (schedule-to-start is never retried).
            schedule_to_start_timeout=timeout,
            start_to_close_timeout=timeout + ACTIVITY_GRACE,
            schedule_to_close_timeout=overall + ACTIVITY_GRACE,
            heartbeat_timeout=CALL_HEARTBEAT_TIMEOUT,
            retry_policy=same_route_retry(tries),
            summary=f"{call.role_name} → {attempt.route} (tier {attempt.tier}){summary}",
        )

    handle = schedule(call.ctx.task_queue)
    if call.ctx.overflow_queue is not None:
        handle = asyncio.create_task(_overflowing(handle, schedule, call.ctx.overflow_queue))
        # A cancelled hedge loser is never awaited: its error is expected, not "lost".
        handle.add_done_callback(_retrieved)
    observe.attempt_scheduled(call, handle, token)
    return handle, used_prefill, now


def same_route_retry(tries: int) -> RetryPolicy:
    """Temporal's retry of a model call on its route: ``tries`` in all, the second after
    :data:`SAME_ROUTE_BACKOFF_S` (a RETRY-class error) or exactly a short Retry-After."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=SAME_ROUTE_BACKOFF_S),
        backoff_coefficient=2.0,
        maximum_attempts=tries,
    )


def _output_schema(call: Call, attempt: PlannedAttempt) -> dict[str, Any] | None:
    """What the answer is validated against: the role's schema or, when the schema
    only went into the prompt, the caller's."""
    path = call.prepared[attempt.route].path
    return output_schema_for(call.ctx.role, path, call.request.json_schema)


def _cache_key(call: Call, attempt: PlannedAttempt) -> str | None:
    """The key to cache the attempt's answer under when that answer would be a full one.

    Mirrors :func:`answers.success`: tiers 0 and 1 answer with full capability unless the
    context was truncated. Called after :func:`prepare`, which may truncate.
    """
    return (
        call.cache_key if caches_answer(call.ctx.role, attempt.tier, call.state.reasons) else None
    )


async def collect(
    call: Call, attempt: PlannedAttempt, handle: asyncio.Task[Any], used_prefill: bool, t0: float
) -> AttemptResult:
    """Wait for a started attempt and record its reply or failure."""
    try:
        result: CallModelResult = await handle
    except ActivityError as err:
        r = outcome(call, attempt, err, used_prefill, t0)
    else:
        r = outcome(call, attempt, result, used_prefill, t0)
    observe.attempt_finished(call, handle, r)
    return r


def outcome(
    call: Call,
    attempt: PlannedAttempt,
    got: CallModelResult | ActivityError,
    used_prefill: bool,
    t0: float,
) -> AttemptResult:
    """An attempt's reply or failure (``got``) as the call records it."""
    prep = call.prepared.get(attempt.route)
    rec = AttemptRecord(
        route=attempt.route,
        tier=attempt.tier,
        started_at=t0,
        hedge=attempt.hedge,
        outcome="pending",
        prompt_variant=prep.variant if prep else None,
        structured_output=prep.path.value if prep and prep.path else None,
        note="; ".join(prep.notes) if prep else "",
    )
    if isinstance(got, ActivityError):
        return _failed(attempt, rec, got, used_prefill, t0)
    result = got
    if not result.reply.endpoint:  # left out of history: it is the attempt's route
        reply = result.reply.model_copy(update={"endpoint": attempt.route})
        result = result.model_copy(update={"reply": reply})
    rec.finished_at = workflow.now().timestamp()
    rec.outcome = "ok"
    rec.latency_ms = result.reply.latency_ms
    rec.ttft_ms = result.reply.ttft_ms
    if used_prefill:
        rec.note = f"{rec.note} continued from partial output (prefill)".strip()
    if result.attempt > 1:
        # A same-route retry inside the activity: a 500 after backoff, or a 429 whose
        # short Retry-After was waited out (the Temporal UI shows the failed attempt).
        rec.note = f"{rec.note} answered on same-route attempt {result.attempt}".strip()
    return AttemptResult(attempt, rec, result, None, {}, used_prefill)


def _failed(
    attempt: PlannedAttempt, rec: AttemptRecord, err: ActivityError, used_prefill: bool, t0: float
) -> AttemptResult:
    """A failed attempt's result: the provider's status, error code and Retry-After."""
    error_type, details = _failure_of(err)
    rec.finished_at = workflow.now().timestamp()
    rec.outcome = error_type
    rec.error = str(err.cause or err)
    rec.latency_ms = details.get("latency_ms") or (rec.finished_at - t0) * 1000
    rec.http_status = details.get("status")
    rec.provider_code = details.get("provider_code")
    rec.retry_after_s = details.get("retry_after_s")
    if isinstance(err.cause, TemporalTimeoutError) and err.cause.type in LOST_ATTEMPT_NOTES:
        rec.note = f"{rec.note} {LOST_ATTEMPT_NOTES[err.cause.type]}".strip()
    return AttemptResult(attempt, rec, None, error_type, details, used_prefill)


async def single(
    call: Call, attempt: PlannedAttempt, tries: int = SAME_ROUTE_ATTEMPTS
) -> list[AttemptResult]:
    """Run one attempt (``tries`` on its route) to its outcome."""
    handle, used_prefill, t0 = start(call, attempt, tries)
    return [await collect(call, attempt, handle, used_prefill, t0)]


def _retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def _overflowing(
    first: asyncio.Task[Any], schedule: Callable[[str, str], asyncio.Task[Any]], queue: str
) -> Any:
    """An eagerly dispatched attempt; sent again to its bulkhead's queue if the worker's
    bulkhead was full (``bulkhead_full``: it never reached the provider)."""
    try:
        return await first
    except ActivityError as err:
        full = isinstance(err.cause, ApplicationError) and err.cause.type == BULKHEAD_FULL
        if not full:
            raise
    return await schedule(queue, " via its bulkhead queue")


def _failure_of(err: ActivityError) -> tuple[str, dict[str, Any]]:
    """The error type and AttemptFailure details of a failed ``call_model``."""
    cause = err.cause
    if isinstance(cause, TemporalTimeoutError):
        return ATTEMPT_TIMEOUT, {}
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details else {}
        return cause.type or "unknown", details if isinstance(details, dict) else {}
    return "unknown", {}
