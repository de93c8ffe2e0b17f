"""A call's role context read in its first attempt's activity (``first_call``), and that
attempt's answer or failure taken as the first round's.

A call with no context to reuse sends its request, options and trial ticket to
``first_call`` (:mod:`activities.first_call`), which reads the context and, when the first
attempt is plain (:mod:`resilience.first_attempt`), runs it. The workflow then plans its
first round from the returned context exactly as it would have (at the call's start, the
same pure inputs) and takes the answer, or the failure that carries the context, as that
round's first attempt. A context returned alone (the attempt was not plain, or a lost try
was retried) is planned from as a local activity's was. A try that fails without a
context (no worker took it in time, or it never read one) leaves the call where it was:
it reads its context with the ``role_context`` local activity, as runs recorded before
this path (patch ``PLAN_IN_FIRST_ATTEMPT``) do on every call.

A failed first attempt that ``call_model`` would have retried on its route (a 500, a
short Retry-After) is retried here the same way: a timer for the delay, then ``call_model``
on that route with the one try left. Temporal retries ``first_call`` itself only when a try
is lost (its worker gone): the retried try reads a fresh context and leaves the attempt to
the workflow, whose record notes the earlier try (the Temporal UI shows it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.first_call import FirstCallActivities
    from agent_failover.activities.first_models import (
        FirstCallInput,
        FirstCallResult,
        context_detail,
    )
    from agent_failover.activities.models import RoleContext
    from agent_failover.resilience.limits import MAX_REQUEST_BYTES
    from agent_failover.resilience.planner import PlannedAttempt
    from agent_failover.resilience.triage import request_bytes
    from agent_failover.workflows import observe
    from agent_failover.workflows.attempts import (
        CALL_HEARTBEAT_TIMEOUT,
        SAME_ROUTE_ATTEMPTS,
        outcome,
        prepare,
        same_route_retry,
        single,
    )
    from agent_failover.workflows.call import AttemptResult, Call
    from agent_failover.workflows.patches import PLAN_IN_FIRST_ATTEMPT

#: ``first_call`` waits no longer for a worker than the local activity it replaces ran.
FIRST_CALL_SCHEDULE_TO_START = timedelta(seconds=10)
#: Its start-to-close timeout, before the role (and its attempt timeout) is known: the
#: activity runs the attempt only when the attempt's own timeout fits inside it.
FIRST_CALL_START_TO_CLOSE = timedelta(minutes=5)


@dataclass(eq=False)
class FirstRound:
    """What ``first_call`` brought (its result, or the one its failure carries, with that
    failure): the context and, when it ran the first attempt, that attempt's route and
    tier and its answer or failure."""

    out: FirstCallResult
    error: ActivityError | None = None

    @property
    def ran(self) -> bool:
        """Whether the activity ran the call's first attempt (else: the context only)."""
        return self.out.route is not None

    @property
    def ctx(self) -> RoleContext:
        return self.out.context

    @property
    def at(self) -> float:
        """Workflow time the activity planned at (the attempt's start in its record)."""
        return self.out.planned_at

    def planned(self, attempt: PlannedAttempt) -> PlannedAttempt:
        """The plan's first attempt as the one that ran (the same, unless the worker's
        plan differed: then the route and tier that ran, logged)."""
        route, tier = self.out.route, self.out.tier
        if attempt.route == route and attempt.tier == tier:
            return attempt
        workflow.logger.warning(
            "first_call ran %s (tier %s) where the workflow planned %s (tier %s)",
            route,
            tier,
            attempt.route,
            attempt.tier,
        )
        return attempt.model_copy(update={"route": route, "tier": tier})


def plan_in_first_attempt() -> bool:
    """Whether this run reads its calls' contexts in their first attempts (patch
    ``PLAN_IN_FIRST_ATTEMPT``; the answer is the run's, asked once).

    Ask it before any local activity where a run starts with one: on replay, a local
    activity's result is read from its marker in the workflow task that scheduled it,
    so code after it can run a task earlier than it did, and a patch asked there is not
    yet known (Temporal fails the replay as non-deterministic). The pipeline asks at its
    start; a call asks on its first use otherwise."""
    return workflow.patched(PLAN_IN_FIRST_ATTEMPT)


def planned_in_activity(call: Call) -> bool:
    """Whether this call's first attempt goes to ``first_call``: its request fits one
    activity input uncut (one that must be cut is bounded by the workflow first, then
    sent), and the run is not one recorded before."""
    if request_bytes(call.request) > MAX_REQUEST_BYTES:
        return False
    return plan_in_first_attempt()


async def first_call(call: Call, started: datetime, routes: list[str] | None) -> FirstRound | None:
    """Run ``first_call`` for ``call``; None when it failed without a context."""
    call.ticket = workflow.random().random()
    queue = workflow.info().task_queue
    inp = FirstCallInput(
        role=call.role_name,
        request=call.request,
        options=call.options,
        routes=routes,
        ticket=call.ticket,
        now=started.timestamp(),
        workflow_queue=queue,
    )
    try:
        out: FirstCallResult = await workflow.execute_activity_method(
            FirstCallActivities.first_call,
            inp,
            task_queue=queue,
            schedule_to_start_timeout=FIRST_CALL_SCHEDULE_TO_START,
            start_to_close_timeout=FIRST_CALL_START_TO_CLOSE,
            heartbeat_timeout=CALL_HEARTBEAT_TIMEOUT,
            retry_policy=same_route_retry(SAME_ROUTE_ATTEMPTS),
            summary=f"{call.role_name} → its first attempt",
        )
    except ActivityError as err:
        cause = err.cause
        got = context_detail(cause.details) if isinstance(cause, ApplicationError) else None
        return None if got is None else FirstRound(got, err)
    return FirstRound(out)


async def first_ran(call: Call, planned: PlannedAttempt, first: FirstRound) -> list[AttemptResult]:
    """The outcome of the first attempt ``first_call`` ran (planned as ``planned``): its
    answer or failure, or, for a failure with a same-route retry due, that retry's."""
    attempt = first.planned(planned)
    delay_s = first.out.retry_in_s
    if delay_s is None:
        return [adopt(call, attempt, first)]
    await workflow.sleep(delay_s, summary=f"same-route retry of {attempt.route}: {delay_s:g} s")
    results = await single(call, attempt, tries=SAME_ROUTE_ATTEMPTS - 1)
    for r in results:
        if r.result is not None:
            r.record.note = f"{r.record.note} answered on same-route attempt 2".strip()
    return results


def adopt(call: Call, attempt: PlannedAttempt, first: FirstRound) -> AttemptResult:
    """The first attempt ``first_call`` ran, as the call records it: prepared as the
    workflow would have sent it (its prompt variant and structured path in the record), its
    answer or failure as from any attempt; its span opened and closed here."""
    request, used_prefill = prepare(call, attempt)
    token = observe.attempt_started(call, attempt, request.max_tokens)
    observe.attempt_scheduled(call, first, token)
    got = first.out.result if first.error is None else first.error
    assert got is not None
    r = outcome(call, attempt, got, used_prefill, first.at)
    observe.attempt_finished(call, first, r)
    return r
