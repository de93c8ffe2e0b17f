"""What a route's quota allows: the handling of a 429 and the shared rate budgets.

:class:`RateLimitSettings` says whether a 429 waits briefly on the same route or cools the
route down and fails over. :class:`RateBudget` is a requests- and tokens-per-minute
budget of one endpoint (its provider quota) or one bulkhead (its share), enforced for all
workers together through the health store (:mod:`resilience.budget` holds the token
bucket arithmetic); :class:`RateBudgets` maps endpoints and bulkheads to their budgets.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from agent_failover.resilience.config.validation import STRICT

#: Longest Retry-After worth waiting for on the same route instead of failing over.
DEFAULT_RATE_LIMIT_MAX_WAIT_MS = 2_000.0
#: Cool-down of a route that answered 429 without saying how long to wait.
DEFAULT_RATE_LIMIT_COOLDOWN_S = 10.0


class RateLimitSettings(BaseModel):
    """What a 429 does: wait briefly on the same route, or cool it down and fail over."""

    model_config = STRICT

    max_wait_ms: float = Field(
        default=DEFAULT_RATE_LIMIT_MAX_WAIT_MS,
        ge=0.0,
        le=60_000.0,
        description="A 429 whose Retry-After is at most this many milliseconds, and that "
        "leaves the retry its TTFT budget before the call's deadline, is retried once on the "
        "same route after exactly Retry-After; a longer one fails over at once. 0: always "
        "fail over.",
    )
    default_cooldown_s: float = Field(
        default=DEFAULT_RATE_LIMIT_COOLDOWN_S,
        gt=0.0,
        le=3600.0,
        description="Seconds a route cools down after a 429 that did not say how long to "
        "wait (no Retry-After, reset header or `retryDelay`).",
    )


class RateBudget(BaseModel):
    """Requests- and tokens-per-minute budget of one endpoint or one bulkhead.

    Shared by every worker through the health store (a token bucket per unit holding one
    minute of the rate, see :mod:`resilience.budget`). ``reserve`` is the share of each
    bucket that only ``critical`` roles may use, so ordinary and failover traffic cannot
    exhaust the quota a critical role needs.
    """

    model_config = STRICT

    requests_per_minute: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Calls per minute, for all workers together. At least one of the two "
        "limits is required.",
    )
    tokens_per_minute: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000_000,
        description="Input plus output tokens per minute, for all workers together; a call "
        "reserves its input estimate plus its `max_tokens` and settles with the reported "
        "usage.",
    )
    reserve: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Share of each bucket only `critical` roles may use: an ordinary role's "
        "call is refused once it would leave less than this.",
    )

    @model_validator(mode="after")
    def _some_limit(self) -> RateBudget:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError("set requests_per_minute, tokens_per_minute or both")
        return self


class RateBudgets(BaseModel):
    """Rate budgets per endpoint (its provider quota) and per bulkhead (its share)."""

    model_config = STRICT

    endpoints: dict[str, RateBudget] = Field(
        default_factory=dict,
        description="Budget of each endpoint (its provider quota), keyed by endpoint name.",
    )
    bulkheads: dict[str, RateBudget] = Field(
        default_factory=dict,
        description="Budget of each bulkhead (its share of the quota), keyed by a bulkhead "
        "some role runs in.",
    )

    def limited(self) -> bool:
        return bool(self.endpoints or self.bulkheads)
