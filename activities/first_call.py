"""``first_call``: a call's role context read and, when plain, its first attempt run, in one
activity (issue 24: no local activity before a healthy call's attempt).

The context is read as ``role_context`` reads it (with the in-flight lease on the role's
first route) and planned from as the workflow will plan from it. (History keeps the
snapshot's floats to :data:`~activities.snapshot_history.SNAPSHOT_DECIMALS` digits: a plan
that a rounding tips the other way, a latency within a microsecond of a threshold, would
differ there, and the workflow then takes the route that ran, with a warning.) A plain
first attempt
(:func:`resilience.first_attempt.plain_first`) runs through ``call_model``'s own path (the
bulkhead's gate, admission, budgets, streaming, validation, records); its answer returns
with the context, its failure raises ``call_model``'s error with the context as a second
detail, so the workflow folds it like any attempt's. Anything else returns the context
only: a plan that waits, hedges, triages or takes a floor attempt, attempts that go to
another queue, a full bulkhead, a try after the first (Temporal's retry of a lost one),
or an activity timeout shorter than the attempt needs.

A failed attempt is not retried by Temporal here: a retry would plan afresh, maybe on
another route. The error says when ``call_model`` would have been retried on the same
route (``retry_in_s``), and the workflow runs that retry itself (a timer, then
``call_model`` with the one try left), so a route gets the same two tries either way.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_failover.activities.failures import BULKHEAD_FULL
from agent_failover.activities.first_models import (
    ATTEMPT_GRACE,
    SAME_ROUTE_BACKOFF_S,
    FirstCallInput,
    FirstCallResult,
    attempt_input,
)
from agent_failover.activities.model_call import ModelCallActivities, attempt_number
from agent_failover.activities.models import (
    CallModelInput,
    RoleContext,
    RoleContextInput,
)
from agent_failover.activities.role_context import RoleContextActivities
from agent_failover.resilience.cachekey import cache_key
from agent_failover.resilience.config import PolicyError
from agent_failover.resilience.first_attempt import PlainFirst, plain_first, role_request
from agent_failover.resilience.options import apply_call_options


class FirstCallActivities:
    """``first_call`` over a worker's role-context and model-call activities."""

    def __init__(self, contexts: RoleContextActivities, calls: ModelCallActivities) -> None:
        self._contexts = contexts
        self._calls = calls

    @activity.defn(name="first_call")
    async def first_call(self, inp: FirstCallInput) -> FirstCallResult:
        """The call's role context, with its first attempt's answer when that attempt is
        plain (see the module doc); a failed attempt raises with the context attached."""
        tries = attempt_number()
        retry = tries > 1
        ctx = await self._contexts.role_context(
            RoleContextInput(
                role=inp.role,
                now=inp.now,
                routes=inp.routes,
                workflow_queue=inp.workflow_queue,
                # A retried try (its first lost) leaves the attempt to the workflow, which
                # hands the lease on: take none that nothing would carry.
                lease=not retry,
            )
        )
        out = FirstCallResult(context=ctx, planned_at=inp.now, tries=tries)
        planned = None if retry else self._plain(ctx, inp)
        if planned is None:
            return out
        first, call = planned
        try:
            result = await self._calls.call_model(call)
        except ApplicationError as err:
            if err.type == BULKHEAD_FULL:
                return out  # refused before the provider: the workflow uses the bulkhead's queue
            raise _with_context(err, out, first) from err
        return out.model_copy(
            update={"route": first.attempt.route, "tier": first.attempt.tier, "result": result}
        )

    def _plain(
        self, ctx: RoleContext, inp: FirstCallInput
    ) -> tuple[PlainFirst, CallModelInput] | None:
        """The plain first attempt to run here and its input, or None (the workflow's)."""
        if ctx.task_queue != inp.workflow_queue:
            return None  # the role's attempts go to another queue
        try:
            role = apply_call_options(ctx.role, ctx.policy, inp.options)
        except PolicyError:
            return None  # the workflow fails the call with this error's words
        first = plain_first(
            role, ctx.policy, ctx.snapshot, inp.request, ticket=inp.ticket, now=inp.now
        )
        if first is None or not _time_for(first.attempt.timeout_ms):
            return None
        key = cache_key(inp.role, role_request(inp.request, role)) if first.cache else None
        call = attempt_input(
            inp.role,
            role,
            first.attempt,
            first.request,
            output_schema=first.output_schema,
            now=inp.now,
            started_at=inp.now,
            cache_key=key,
            lease=ctx.lease,
        )
        return first, call


def _with_context(
    err: ApplicationError, out: FirstCallResult, first: PlainFirst
) -> ApplicationError:
    """``err`` with the context, the attempt's route and tier as its second detail, not
    retried by Temporal: a retry ``call_model`` would get (``retry_in_s``) is the
    workflow's to run on the same route, since a retried ``first_call`` plans afresh."""
    retry_in_s = None
    if not err.non_retryable:
        delay = err.next_retry_delay
        retry_in_s = delay.total_seconds() if delay is not None else SAME_ROUTE_BACKOFF_S
    failed = out.model_copy(
        update={"route": first.attempt.route, "tier": first.attempt.tier, "retry_in_s": retry_in_s}
    )
    details = [*(err.details[:1] or [{}]), failed.model_dump(mode="json")]
    return ApplicationError(
        err.message, *details, type=err.type, non_retryable=True, category=err.category
    )


def _time_for(timeout_ms: float) -> bool:
    """Whether this activity's start-to-close timeout holds an attempt of ``timeout_ms``."""
    try:
        limit = activity.info().start_to_close_timeout
    except RuntimeError:
        return True  # called directly (tests)
    need = timedelta(milliseconds=timeout_ms) + ATTEMPT_GRACE
    return limit is None or limit >= need
