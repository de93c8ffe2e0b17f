"""One model attempt on one route: admit, reserve budget, stream, validate, record, classify.

``call_model`` is the activity every resilient call's attempts run. It holds the
bulkhead's slot when dispatched eagerly, takes the breaker's admission and the shared rate
budgets, streams the reply through the provider's adapter with heartbeats carrying the
partial text's tail, validates it, records the outcome on the workflow's clock, caches a
full answer when asked, and maps a failure to what Temporal retries
(:mod:`activities.failures`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agent_failover.activities.call_leases import AttemptLeases
from agent_failover.activities.deps import ActivityDeps, workflow_now
from agent_failover.activities.failures import (
    BULKHEAD_FULL,
    POLICY_ERROR,
    breaker_rejected,
    failed_outcome,
    to_application_error,
)
from agent_failover.activities.models import CallModelInput, CallModelResult
from agent_failover.resilience.admission import Admission
from agent_failover.resilience.budget import scopes_for
from agent_failover.resilience.config import BreakerSettings, EndpointConfig, PolicyError
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.errors import (
    ContextLengthError,
    ErrorClass,
    LocalSaturationError,
    ProviderError,
)
from agent_failover.resilience.estimate import estimate_request_tokens
from agent_failover.resilience.models import ChatReply
from agent_failover.resilience.outcomes import RATE_BUDGET
from agent_failover.resilience.ratelimit import RateLimitWait, same_route_wait_s
from agent_failover.stores.budgets import BudgetGrant
from agent_failover.telemetry import record

if TYPE_CHECKING:
    from agent_failover.providers.client import Budgets
    from agent_failover.stores.after_call import CachePut

#: Heartbeat cadence of a model call, the first one this long after it starts
#: (cancellation rides on heartbeats; the worker's core sends at most one every 4 s of
#: the 5 s heartbeat timeout anyway), so a call that answers within it sends none.
HEARTBEAT_EVERY_S = 1.0
#: Characters of partial text a heartbeat carries (the tail).
HEARTBEAT_TAIL_CHARS = 400


class ModelCallActivities:
    """``call_model`` over one worker's :class:`ActivityDeps`."""

    def __init__(self, deps: ActivityDeps) -> None:
        self._deps = deps

    @activity.defn(name="call_model")
    async def call_model(self, inp: CallModelInput) -> CallModelResult:
        """One attempt on one route, inside its bulkhead's slot limit when dispatched eagerly.

        On the workflow's queue a full bulkhead fails at once (``bulkhead_full``, before
        admission: not the route's fault), so a saturated bulkhead never holds more of the
        shared worker's slots than its own limit; on the bulkhead's queue it waits there.
        """
        gate = self._gate_for(inp.role)
        if gate is None:
            return await self._call_model(inp)
        if gate.locked() and not self._on_overflow_queue(inp.role):
            raise ApplicationError(
                f"bulkhead {self._deps.policy.role(inp.role).bulkhead!r} is full on this worker",
                type=BULKHEAD_FULL,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,
            )
        async with gate:
            return await self._call_model(inp)

    def _gate_for(self, role: str) -> asyncio.Semaphore | None:
        if not self._deps.gates or role not in self._deps.policy.roles:
            return None
        return self._deps.gates.get(self._deps.policy.role(role).bulkhead)

    def _on_overflow_queue(self, role: str) -> bool:
        try:
            queue = activity.info().task_queue
        except RuntimeError:
            return False  # called directly (tests)
        overflow_for = self._deps.overflow_queue_for
        return overflow_for is not None and queue == overflow_for(role)

    async def _call_model(self, inp: CallModelInput) -> CallModelResult:
        """One attempt on one route: admit, stream, validate, record, classify."""
        from agent_failover.providers.registry import complete  # worker side
        from agent_failover.providers.validate import validate_reply

        endpoint = self._endpoint(inp.route)
        settings = self._deps.policy.trial_settings(inp.route, inp.role)
        base = _attempt_base(inp.now)
        started = time.monotonic()
        leases = self._leases(inp)
        admission, grant = await self._admitted(inp, settings, (base, started), leases)
        progress = _Progress()
        beat = asyncio.create_task(_heartbeat_loop(progress))
        leases.take(workflow_now(base, started), inp.timeout_ms / 1000)
        reply: ChatReply | None = None
        answered = False
        try:
            reply = await complete(
                self._deps.http,
                endpoint,
                inp.request,
                self._budgets(inp),
                on_progress=progress.update,
            )
            data = validate_reply(
                reply, inp.output_schema, endpoint=inp.route, max_reply_bytes=inp.max_reply_bytes
            )
            answered = True
        except ProviderError as err:
            elapsed_ms = (time.monotonic() - started) * 1000
            at = workflow_now(base, started)
            await self._settle_unanswered(inp, grant, at)
            failed = _Failed(
                err, elapsed_ms, admission.trial, at, billed=reply, lease=admission.lease
            )
            await self._record_failure(inp, failed, settings)
            wait = self._rate_limit_wait(inp, err, at)
            raise to_application_error(inp.route, err, elapsed_ms, wait) from err
        except asyncio.CancelledError:
            await self._on_cancelled(inp, grant, admission, workflow_now(base, started))
            raise
        finally:
            beat.cancel()
            if not answered:  # an answer's leases go back in its record's round trip
                leases.release_soon()
        outcome = _answered(inp.route, reply, workflow_now(base, started), admission, inp.role)
        await self._on_answer(inp, endpoint, (reply, data), outcome, grant, settings, leases)
        return CallModelResult(
            reply=reply, data=data, trial=admission.trial, attempt=attempt_number()
        ).for_route(inp.route)

    def _leases(self, inp: CallModelInput) -> AttemptLeases:
        """The attempt's in-flight leases: its own, taken beside the provider call (no added
        round trip) or held since its role context, and the role context's otherwise."""
        first_try = attempt_number() == 1
        return AttemptLeases(self._deps.health.in_flight, inp.route, inp.lease, first_try=first_try)

    async def _admitted(
        self,
        inp: CallModelInput,
        settings: BreakerSettings,
        clock: tuple[float, float],
        leases: AttemptLeases,
    ) -> tuple[Admission, BudgetGrant]:
        """The breaker's admission and the rate budgets' reservation; a refusal gives back
        the role context's lease the input brought (no call follows on this route)."""
        try:
            admission = await self._admit(inp, settings, workflow_now(*clock))
            reserved = estimate_request_tokens(inp.request) + inp.request.max_tokens
            return admission, await self._take_budget(
                inp, reserved, admission, workflow_now(*clock)
            )
        except BaseException:
            leases.release_soon()
            raise

    async def _on_cancelled(
        self, inp: CallModelInput, grant: BudgetGrant, admission: Admission, now: float
    ) -> None:
        """A hedge loser or a workflow cancel: not the route's fault, free the trial slot
        (raises ``AttemptAbandoned`` for a loser whose run has ended)."""
        await self._settle_unanswered(inp, grant, now)
        if admission.trial:
            await self._deps.health.release_trial(inp.route, now, admission.lease)
        _raise_if_abandoned()

    def _endpoint(self, route: str) -> EndpointConfig:
        try:
            return self._deps.policy.endpoint(route)
        except PolicyError as exc:
            # The workflow planned with a policy this worker does not share: a deployment
            # configuration error that no retry and no other route can fix.
            raise ApplicationError(
                f"this worker's policy cannot serve the call: {exc}",
                type=POLICY_ERROR,
                non_retryable=True,
            ) from exc

    async def _admit(self, inp: CallModelInput, settings: BreakerSettings, now: float) -> Admission:
        """The breaker's admission, or a non-retryable ``breaker_rejected`` error.

        A half-open trial's slot is leased for the attempt's timeout (plus the breaker's
        grace): if this worker dies mid-call, the slot lapses instead of leaking.
        """
        route = inp.route
        admission = await self._deps.health.admit(
            route, settings, now, hold_s=inp.timeout_ms / 1000
        )
        if not admission.permitted:
            raise breaker_rejected(route, admission, now)
        return admission

    def _budgets(self, inp: CallModelInput) -> Budgets:
        from agent_failover.providers.client import Budgets  # worker side

        return Budgets(
            connect_s=min(self._deps.connect_s, inp.timeout_ms / 1000),
            ttft_s=inp.ttft_budget_ms / 1000,
            idle_s=inp.idle_budget_ms / 1000,
            total_s=inp.timeout_ms / 1000,
            max_reply_bytes=inp.max_reply_bytes,
            bulkhead=self._deps.policy.role(inp.role).bulkhead
            if inp.role in self._deps.policy.roles
            else "",
        )

    async def _on_answer(
        self,
        inp: CallModelInput,
        endpoint: EndpointConfig,
        answer: tuple[ChatReply, Any],
        outcome: CallOutcome,
        grant: BudgetGrant,
        settings: BreakerSettings,
        leases: AttemptLeases,
    ) -> None:
        """Record the success with the cache write when it qualifies and the in-flight
        leases' ends (one round trip when the stores share a Redis), settle the rate budget."""
        reply, data = answer
        # A turn that asks for tools is not an answer: served from the cache later it would
        # read as an empty reply (the cache keeps text, not tool calls).
        put = None
        if inp.cache is not None and not reply.tool_calls:
            put = _cache_put(inp, reply, data, outcome.at)
        await self._deps.record(outcome, settings, put, await leases.ends())
        if grant.limited:
            used = reply.usage.input_tokens + reply.usage.output_tokens
            await self._deps.health.settle_budget(grant, used, outcome.at)
        record.attempt_answered(inp.role, endpoint, reply)

    async def _take_budget(
        self, inp: CallModelInput, tokens: int, admission: Admission, now: float
    ) -> BudgetGrant:
        """Reserve the call's request and token estimate from its shared rate budgets.

        A refusal ends the attempt without calling the provider (``rate_budget``, not a
        route failure: nothing is recorded against the route) and says when it refills.
        """
        scopes = scopes_for(self._deps.policy, inp.role, inp.route)
        if not scopes:
            return BudgetGrant(granted=True)
        critical = self._deps.policy.role(inp.role).critical
        grant = await self._deps.health.take_budget(scopes, tokens, critical=critical, now=now)
        if grant.granted:
            return grant
        if admission.trial:
            await self._deps.health.release_trial(inp.route, now, admission.lease)
        bulkhead = self._deps.policy.role(inp.role).bulkhead
        record.budget_refused(inp.role, inp.route, bulkhead, grant.refused_by or "")
        raise ApplicationError(
            f"rate budget {grant.refused_by} has no room for route {inp.route!r} "
            f"({tokens} tokens) for {grant.wait_s:.1f}s",
            {"retry_after_s": grant.wait_s, "scope": grant.refused_by, "latency_ms": 0.0},
            type=RATE_BUDGET,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        )

    async def _settle_unanswered(self, inp: CallModelInput, grant: BudgetGrant, at: float) -> None:
        """An attempt without an answer keeps its input estimate charged (the provider may
        have read the prompt) and gives back the output reservation."""
        if grant.limited:
            await self._deps.health.settle_budget(grant, estimate_request_tokens(inp.request), at)

    def _rate_limit_wait(
        self, inp: CallModelInput, err: ProviderError, at: float
    ) -> RateLimitWait | None:
        """For a 429: wait it out on this route (a Temporal retry) or fail over now."""
        if err.error_class is not ErrorClass.RATE_LIMITED:
            return None
        return same_route_wait_s(
            err.retry_after,
            self._deps.policy.rate_limit,
            now=at,
            deadline=inp.deadline_at,
            min_attempt_ms=inp.ttft_budget_ms,
            retry_left=_retry_left(),
        )

    async def _record_failure(
        self, inp: CallModelInput, failed: _Failed, settings: BreakerSettings
    ) -> None:
        err, at, elapsed_ms = failed.err, failed.at, failed.elapsed_ms
        outcome = failed_outcome(
            inp.route,
            err,
            at,
            elapsed_ms,
            trial=failed.trial,
            rate_limit=self._deps.policy.rate_limit,
        ).model_copy(update={"role": inp.role, "trial_lease": failed.lease})
        if failed.billed is not None:
            # A whole body came back and was rejected (a semantic failure): the provider
            # billed it, so its spend counts against the route's tokens per dollar.
            usage = failed.billed.usage
            outcome = outcome.model_copy(
                update={
                    "tokens": usage.input_tokens + usage.output_tokens,
                    "cost_usd": failed.billed.cost_usd,
                }
            )
        await self._deps.record(outcome, settings)
        if isinstance(err, ContextLengthError) and err.context_window is not None:
            # The provider's statement beats the configured window, for every worker.
            await self._deps.health.learn_context_window(inp.route, err.context_window, at)
        record.attempt_failed(
            inp.role,
            self._deps.policy.endpoint(inp.route),
            err.error_class.value,
            elapsed_ms,
            semantic=err.classification.semantic,
            billed_usd=outcome.cost_usd,
        )
        if isinstance(err, LocalSaturationError):
            record.local_saturation(inp.role, inp.route, err.bulkhead)


def _cache_put(inp: CallModelInput, reply: ChatReply, data: Any, at: float) -> CachePut:
    """The answer as the response cache keeps it (the workflow asked: a full answer),
    written with the outcome record (:mod:`stores.after_call`), never failing the call."""
    from agent_failover.stores.after_call import CachePut  # worker side
    from agent_failover.stores.cache import CachedEntry

    assert inp.cache is not None
    entry = CachedEntry(
        role=inp.role,
        content=reply.text,
        data=data,
        model=reply.model,
        route=inp.route,
        stored_at=at,
    )
    return CachePut(inp.cache.key, entry, inp.cache.keep_s)


def _answered(
    route: str, reply: ChatReply, at: float, admission: Admission, role: str | None
) -> CallOutcome:
    """The outcome of an answered attempt, with the tokens and spend it was billed."""
    return CallOutcome(
        route=route,
        at=at,
        ok=True,
        latency_ms=reply.latency_ms,
        ttft_ms=reply.ttft_ms,
        trial=admission.trial,
        trial_lease=admission.lease,
        role=role,
        tokens=reply.usage.input_tokens + reply.usage.output_tokens,
        cost_usd=reply.cost_usd,
    )


@dataclass(frozen=True)
class _Failed:
    """A failed attempt: its error, timing, whether it was a trial, and the reply the
    provider billed when a whole body came back before it was rejected."""

    err: ProviderError
    elapsed_ms: float
    trial: bool
    at: float
    billed: ChatReply | None = None
    lease: str | None = None


class _Progress:
    """Latest streamed text, shared between the provider callback and the heartbeat loop.

    Only the loop heartbeats: one heartbeat per progress report cost an asyncio task, a
    payload encoding and a call into the worker's core each (three per healthy call),
    while the core sends at most one per throttle interval and only the newest counts.
    """

    def __init__(self) -> None:
        self.text = ""
        self.tokens = 0

    def update(self, text: str, tokens: int) -> None:
        self.text = text
        self.tokens = tokens


#: Error type of an attempt whose run had already ended when it learned it was cancelled.
ATTEMPT_ABANDONED = "AttemptAbandoned"


def _raise_if_abandoned() -> None:
    """Turn the cancellation of an attempt whose run has ended into a benign failure.

    A hedge loser learns of its cancellation on its next heartbeat; when the run has
    completed by then, the server no longer knows the activity and the SDK reports the
    cancellation as a failure, logged as a WARNING with a traceback. Nothing went wrong:
    the race was decided. A BENIGN error is logged at DEBUG and never retried.
    """
    try:
        details = activity.cancellation_details()
    except RuntimeError:
        return  # called directly (tests), not as an activity
    if details is not None and details.not_found and not details.cancel_requested:
        raise ApplicationError(
            "attempt abandoned: its run ended before it finished (a hedge race's loser)",
            type=ATTEMPT_ABANDONED,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        )


def _safe_heartbeat(progress: _Progress) -> None:
    # Heartbeats carry the tail of the partial text so an operator can see how far a
    # stream got; never the whole text, which an endless stream would grow without bound.
    try:
        activity.heartbeat(
            {"tokens": progress.tokens, "partial": progress.text[-HEARTBEAT_TAIL_CHARS:]}
        )
    except RuntimeError:
        pass  # not inside an activity (direct calls in tests)


async def _heartbeat_loop(progress: _Progress) -> None:
    # Cancellation reaches an activity only through heartbeats, and a route that never
    # sends its first token would otherwise never heartbeat. The first beat waits one
    # interval: a call that answers sooner costs no heartbeat at all, and a hedge loser
    # cancelled in its first second learns it at that first beat (not the core's next
    # throttled one, 4 s on).
    while True:
        await asyncio.sleep(HEARTBEAT_EVERY_S)
        _safe_heartbeat(progress)


def _attempt_base(scheduled_now: float) -> float:
    """Workflow time at which this attempt was scheduled.

    ``scheduled_now`` is the workflow's clock when it scheduled the activity; a Temporal
    retry (a 500, or a 429 waited out) reuses that input, so add the server time between
    the first schedule and this attempt's, keeping health timestamps on the workflow clock.
    """
    try:
        info = activity.info()
    except RuntimeError:
        return scheduled_now  # called directly (tests), not as an activity
    if info.attempt <= 1:
        return scheduled_now
    return (
        scheduled_now + (info.current_attempt_scheduled_time - info.scheduled_time).total_seconds()
    )


def attempt_number() -> int:
    """Temporal's attempt number of this activity (1 outside an activity: tests)."""
    try:
        return activity.info().attempt
    except RuntimeError:
        return 1


def _retry_left() -> bool:
    """Whether Temporal will run this activity again if it fails retryably."""
    try:
        info = activity.info()
    except RuntimeError:
        return True
    policy = info.retry_policy
    if policy is None or not policy.maximum_attempts:
        return True
    return info.attempt < policy.maximum_attempts
