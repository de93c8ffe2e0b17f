"""What a 429 does to the call that got it: wait on the same route, or fail over now.

A rate limit with a short Retry-After is cheaper to wait out than to fail over: the
standby may be slower, dearer or a smaller model, and the primary will answer in a
second or two. :func:`same_route_wait_s` is the one rule: wait exactly Retry-After on the
same route when it is at most ``rate_limit.max_wait_ms`` and the retry would still start
with at least its time-to-first-token budget before the call's deadline; otherwise fail
over at once (the route is cooled down for Retry-After either way, see
:func:`resilience.breaker.cool_down`). The wait itself is a Temporal retry with
``next_retry_delay``: a durable server-side timer, never a sleep in a worker.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from agent_failover.resilience.config import RateLimitSettings


class WaitVerdict(StrEnum):
    """Why a 429 was (or was not) waited out on the same route."""

    WAIT = "wait"
    NO_HINT = "no_hint"  # the provider did not say how long
    TOO_LONG = "too_long"  # longer than rate_limit.max_wait_ms
    PAST_DEADLINE = "past_deadline"  # the retry could not answer before the deadline
    NO_RETRY_LEFT = "no_retry_left"  # the same-route attempt was already used


class RateLimitWait(BaseModel):
    """The decision for one 429: wait ``delay_s`` and retry the same route, or fail over."""

    model_config = ConfigDict(frozen=True)

    verdict: WaitVerdict
    delay_s: float | None = None

    @property
    def wait(self) -> bool:
        return self.verdict is WaitVerdict.WAIT


def same_route_wait_s(
    retry_after_s: float | None,
    settings: RateLimitSettings,
    *,
    now: float,
    deadline: float | None,
    min_attempt_ms: float,
    retry_left: bool = True,
) -> RateLimitWait:
    """Wait ``retry_after_s`` on the same route, or fail over (see the module doc).

    ``deadline`` is the call's end on the same clock as ``now`` (None: no deadline);
    ``min_attempt_ms`` is the least time a retry needs to be worth starting (the
    attempt's TTFT budget); ``retry_left`` is False once the same-route retry was spent.
    """
    if retry_after_s is None:
        return RateLimitWait(verdict=WaitVerdict.NO_HINT)
    if not retry_left:
        return RateLimitWait(verdict=WaitVerdict.NO_RETRY_LEFT)
    if retry_after_s * 1000.0 > settings.max_wait_ms:
        return RateLimitWait(verdict=WaitVerdict.TOO_LONG)
    if deadline is not None and now + retry_after_s + min_attempt_ms / 1000.0 > deadline:
        return RateLimitWait(verdict=WaitVerdict.PAST_DEADLINE)
    return RateLimitWait(verdict=WaitVerdict.WAIT, delay_s=retry_after_s)


def cooldown_s(retry_after_s: float | None, settings: RateLimitSettings) -> float:
    """How long a 429 keeps the route out: Retry-After, else the policy's default."""
    if retry_after_s is not None:
        return max(retry_after_s, 0.0)
    return settings.default_cooldown_s


def shared_cooldown_wait_ms(
    shared_until: float | None,
    call_until: float | None,
    settings: RateLimitSettings,
    *,
    now: float,
    remaining_ms: float,
    ttft_budget_ms: float,
) -> float | None:
    """How long a call waits for a route another request's 429 cooled down (a probe's,
    or another call's), or None when it must skip the route.

    ``shared_until`` is the route's shared ``cooldown_until``; ``call_until`` this call's
    own cool-down of the route (its own 429 already chose: it is never waited here). The
    rule is :func:`same_route_wait_s` with what is left of Retry-After: a wait of at most
    ``max_wait_ms`` that leaves the attempt its TTFT budget before the call's end (``now``
    plus ``remaining_ms``) beats failing over to a slower, dearer or smaller standby.
    """
    if shared_until is None or shared_until <= now or (call_until or 0.0) > now:
        return None
    wait = same_route_wait_s(
        shared_until - now,
        settings,
        now=now,
        deadline=now + remaining_ms / 1000.0,
        min_attempt_ms=ttft_budget_ms,
    )
    return wait.delay_s * 1000.0 if wait.wait and wait.delay_s is not None else None
