"""How a failed attempt leaves an activity: its health observation and its Temporal error.

A classified :class:`~resilience.errors.ProviderError` becomes two things here: the
:class:`~resilience.contracts.CallOutcome` the breaker records (:func:`failed_outcome`, for
model calls and probes alike) and the ``ApplicationError`` Temporal retries or not and the
workflow reads (:func:`to_application_error`). The error types activities fail with for
reasons other than a provider's are named here too.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agent_failover.activities.models import AttemptFailure
from agent_failover.resilience.admission import Admission
from agent_failover.resilience.breaker import BreakerReason
from agent_failover.resilience.config import RateLimitSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.errors import Decision, ErrorClass, ProviderError
from agent_failover.resilience.limits import clip, tail
from agent_failover.resilience.outcomes import BREAKER_REJECTED
from agent_failover.resilience.ratelimit import RateLimitWait, cooldown_s

#: Error type when a workflow names a role or route the worker's policy does not have.
POLICY_ERROR = "policy_error"
#: Error type of an eagerly dispatched attempt whose bulkhead had no free slot: the
#: workflow sends it again to the bulkhead's own task queue, where it waits for a slot.
BULKHEAD_FULL = "bulkhead_full"
#: Smallest same-route retry delay for a 429 waited out (a Retry-After of 0 still yields).
MIN_RETRY_DELAY_S = 0.05


def failed_outcome(
    route: str,
    err: ProviderError,
    at: float,
    elapsed_ms: float,
    *,
    trial: bool,
    probe: bool = False,
    rate_limit: RateLimitSettings | None = None,
) -> CallOutcome:
    """The health observation of a classified failure, as its classification counts it.

    A 429 carries its cool-down as ``retry_after_s`` (the provider's Retry-After, else the
    policy's default) so the breaker records ``cooldown_until``.
    """
    cls = err.classification
    retry_after = err.retry_after
    if err.error_class is ErrorClass.RATE_LIMITED:
        retry_after = cooldown_s(err.retry_after, rate_limit or RateLimitSettings())
    return CallOutcome(
        route=route,
        at=at,
        ok=False,
        error_class=err.error_class,
        latency_ms=elapsed_ms,
        semantic_failure=cls.semantic,
        counts_against_route=cls.counts_against_route,
        retry_after_s=retry_after,
        trial=trial,
        probe=probe,
    )


def to_application_error(
    route: str, err: ProviderError, elapsed_ms: float, wait: RateLimitWait | None = None
) -> ApplicationError:
    """Map a classified provider error to what Temporal retries (or not) and the workflow reads.

    Only two things are retried on the same route, by Temporal: a RETRY-class error (a
    500) after the retry policy's backoff, and a 429 whose Retry-After is short enough to
    wait out (``wait``), after exactly that delay. Everything else is the workflow's to
    fail over, so it must not be blindly repeated.
    """
    # Failure details enter history: the partial text keeps only its tail, so a runaway
    # stream fails its attempt cleanly instead of exceeding the gRPC message limit.
    partial, cut = tail(err.partial_text)
    failure = AttemptFailure(
        route=route,
        error_class=err.error_class.value,
        decision=err.decision.value,
        message=clip(err.message),
        status=err.status,
        provider_code=err.provider_code,
        retry_after_s=err.retry_after,
        partial_text=partial,
        partial_chars=len(err.partial_text),
        partial_truncated=cut,
        latency_ms=elapsed_ms,
        context_window=getattr(err, "context_window", None),
        prompt_tokens=getattr(err, "prompt_tokens", None),
        rate_limit_wait=wait.verdict.value if wait is not None else None,
    )
    if wait is not None and wait.wait and wait.delay_s is not None:
        return ApplicationError(
            clip(str(err)),
            failure.model_dump(mode="json"),
            type=err.error_class.value,
            non_retryable=False,
            next_retry_delay=timedelta(seconds=max(wait.delay_s, MIN_RETRY_DELAY_S)),
        )
    retry_same_route = err.decision is Decision.RETRY and err.retryable
    return ApplicationError(
        clip(str(err)),
        failure.model_dump(mode="json"),
        type=err.error_class.value,
        non_retryable=not retry_same_route,
        next_retry_delay=timedelta(seconds=err.retry_after) if err.retry_after else None,
        # A classified provider failure is what failover expects: the SDK then logs it at
        # DEBUG instead of a WARNING with a traceback per attempt (breaker transitions
        # and the failover history say what matters).
        category=ApplicationErrorCategory.BENIGN,
    )


def breaker_rejected(route: str, admission: Admission, now: float) -> ApplicationError:
    """The non-retryable, benign ``breaker_rejected`` error of a refused admission."""
    return ApplicationError(
        f"breaker for route {route!r} rejected the call ({_refusal(admission, now)})",
        _refusal_details(admission, now),
        type=BREAKER_REJECTED,
        non_retryable=True,
        category=ApplicationErrorCategory.BENIGN,
    )


def _refusal(admission: Admission, now: float) -> str:
    """Why the breaker refused, in words: its reason code, and when a trial slot frees."""
    if admission.reason is None:
        return "open"
    why = admission.reason.value
    if admission.reason is BreakerReason.TRIAL_SLOTS_FULL and admission.retry_at is not None:
        why += (
            ": every half-open trial slot is held; the first lease lapses in "
            f"{max(admission.retry_at - now, 0.0):.1f}s"
        )
    return why


def _refusal_details(admission: Admission, now: float) -> dict[str, Any]:
    """The refusal as the attempt record keeps it: the breaker's reason code, and for
    full trial slots when the first lease lapses (``retry_after_s``)."""
    details: dict[str, Any] = {
        "breaker_reason": admission.reason.value if admission.reason else None
    }
    if admission.reason is BreakerReason.TRIAL_SLOTS_FULL and admission.retry_at is not None:
        details["retry_after_s"] = max(admission.retry_at - now, 0.0)
    return details
