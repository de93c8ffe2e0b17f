"""Route health settings: the circuit breaker every route shares and the active probes.

:class:`BreakerSettings` says when a route's breaker trips (error, slow-call and
semantic-failure rates over a window, or failures in a row), how long it stays open and
how it recovers (half-open trials, probation); :class:`BreakerOverride` is the per-route
partial form merged over it. :class:`ProbeSettings` is the tiny completion the health
monitor sends to every endpoint on an interval. Every default is a resilience4j-style seed
named ``DEFAULT_*`` beside the field it seeds.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field, model_validator

from agent_failover.resilience.config.validation import STRICT

DEFAULT_ERROR_RATE_THRESHOLD = 0.15
DEFAULT_ERROR_WINDOW_S = 30.0
DEFAULT_MIN_CALLS = 10
DEFAULT_SLOW_CALL_MS: float | None = None
DEFAULT_SLOW_CALL_BASELINE_FACTOR = 3.0
DEFAULT_SLOW_CALL_RATE_THRESHOLD = 0.5
#: Seed 003's latency breaker: the error window's p95 above this multiple of the route's
#: 7-day baseline p95 (with ``min_calls`` calls in the window) opens the breaker.
DEFAULT_P95_BASELINE_FACTOR: float | None = 3.0
DEFAULT_SEMANTIC_FAILURE_THRESHOLD = 0.10
DEFAULT_SEMANTIC_WINDOW_S = 60.0
DEFAULT_OPEN_DURATION_S = 30.0
DEFAULT_OPEN_DURATION_MULTIPLIER = 2.0
DEFAULT_MAX_OPEN_DURATION_S = 300.0
DEFAULT_HALF_OPEN_MAX_TRIALS = 3
DEFAULT_CLOSE_AFTER_CONSECUTIVE_SUCCESSES = 3
#: Seconds a half-open trial lease outlives its attempt's timeout: time to record the
#: outcome (a Redis round trip or two) before the slot lapses for a holder that died.
DEFAULT_TRIAL_LEASE_GRACE_S = 5.0
DEFAULT_TRIAL_LATENCY_MS: float | None = None  # None: the TTFT budget of the roles using the route
#: Share of real calls that may be half-open trials; 0 = only probes trial a half-open route.
DEFAULT_HALF_OPEN_CALL_FRACTION = 0.0
#: Failures in a row (counting against the route, 429s excluded) that open a closed
#: breaker whatever its window's error rate: Envoy outlier detection's consecutive_5xx.
DEFAULT_CONSECUTIVE_FAILURES: int | None = 5
#: Of those, time-budget failures in a row (first token, stalled stream, no response)
#: that open it: each cost its caller the whole budget, and while the first one waits
#: out its budget, rate x budget more calls are already on their way to the route.
DEFAULT_CONSECUTIVE_TIMEOUTS: int | None = 3
#: Seconds after closing during which one failure re-opens (None: ``open_duration_s``).
DEFAULT_PROBATION_S: float | None = None

#: Seed 000: every endpoint is probed every 10 s.
DEFAULT_PROBE_INTERVAL_S = 10.0
MIN_PROBE_INTERVAL_S = 1.0
#: Half-open routes are probed this many times faster than the probe interval, so the
#: close_after_consecutive_successes good probes take a fraction of an interval.
HALF_OPEN_PROBE_SPEEDUP = 4.0
MAX_PROBE_INTERVAL_S = 3600.0
DEFAULT_PROBE_TIMEOUT_S = 10.0
DEFAULT_PROBE_MAX_TOKENS = 8


class BreakerSettings(BaseModel):
    """When a route's circuit breaker trips, how long it stays open and how it recovers."""

    model_config = STRICT

    error_rate_threshold: float = Field(
        default=DEFAULT_ERROR_RATE_THRESHOLD,
        gt=0.0,
        le=1.0,
        description="A closed breaker opens when errors / calls over `error_window_s` reach "
        "this share. Semantic failures are not errors: they have their own rate.",
    )
    error_window_s: float = Field(
        default=DEFAULT_ERROR_WINDOW_S,
        gt=0.0,
        le=3600.0,
        description="Seconds of recent calls the error rate and the slow-call rate cover.",
    )
    min_calls: int = Field(
        default=DEFAULT_MIN_CALLS,
        ge=1,
        le=10_000,
        description="Calls a window must hold before its rate or percentile can trip the "
        "breaker: the error window for the error rate, slow calls and p95, the semantic "
        "window for the semantic failure rate.",
    )
    slow_call_ms: float | None = Field(
        default=DEFAULT_SLOW_CALL_MS,
        gt=0.0,
        description="Milliseconds above which a call is slow. Null: slower than "
        "`slow_call_baseline_factor` x the route's baseline p95, the rolling 7-day p95 of "
        "its successful real calls once it holds `min_calls` samples, else the p95 of the "
        "last 10 minutes; with neither, slow-call detection is off.",
    )
    slow_call_baseline_factor: float = Field(
        default=DEFAULT_SLOW_CALL_BASELINE_FACTOR,
        ge=1.0,
        le=100.0,
        description="Multiple of the baseline p95 that makes a call slow when "
        "`slow_call_ms` is null.",
    )
    slow_call_rate_threshold: float = Field(
        default=DEFAULT_SLOW_CALL_RATE_THRESHOLD,
        gt=0.0,
        le=1.0,
        description="A closed breaker opens when slow calls / calls over `error_window_s` "
        "reach this share.",
    )
    p95_baseline_factor: float | None = Field(
        default=DEFAULT_P95_BASELINE_FACTOR,
        ge=1.0,
        le=100.0,
        description="A closed breaker opens when the p95 latency of the calls over "
        "`error_window_s` (at least `min_calls` of them) exceeds this multiple of the "
        "route's baseline p95 (the rolling 7-day p95, else the last 10 minutes'; see "
        "`slow_call_ms`), so a minority of very slow calls trips it. Null: off.",
    )
    semantic_failure_threshold: float = Field(
        default=DEFAULT_SEMANTIC_FAILURE_THRESHOLD,
        gt=0.0,
        le=1.0,
        description="A closed breaker opens when semantic failures (empty, truncated, "
        "invalid JSON or schema, malformed tool call) / calls over `semantic_window_s` "
        "reach this share.",
    )
    semantic_window_s: float = Field(
        default=DEFAULT_SEMANTIC_WINDOW_S,
        gt=0.0,
        le=3600.0,
        description="Seconds of recent calls the semantic failure rate covers.",
    )
    open_duration_s: float = Field(
        default=DEFAULT_OPEN_DURATION_S,
        gt=0.0,
        le=86_400.0,
        description="Seconds the first trip keeps the breaker open.",
    )
    open_duration_multiplier: float = Field(
        default=DEFAULT_OPEN_DURATION_MULTIPLIER,
        ge=1.0,
        le=10.0,
        description="Each consecutive trip (a failed half-open trial re-trips) multiplies "
        "the open time by this: 30 s, 60 s, 120 s, ... The count resets when the breaker "
        "closes.",
    )
    max_open_duration_s: float = Field(
        default=DEFAULT_MAX_OPEN_DURATION_S,
        gt=0.0,
        le=86_400.0,
        description="Cap in seconds on the growing open time, at least `open_duration_s`, "
        "so a dead route is still re-checked.",
    )
    half_open_max_trials: int = Field(
        default=DEFAULT_HALF_OPEN_MAX_TRIALS,
        ge=1,
        le=100,
        description="Trial calls admitted at once while the breaker is half-open; more are "
        "rejected (`trial_slots_full`) until one reports, is released or its lease lapses. "
        "Probes never take one of these slots.",
    )
    trial_lease_grace_s: float = Field(
        default=DEFAULT_TRIAL_LEASE_GRACE_S,
        ge=0.0,
        le=3600.0,
        description="A half-open trial slot is a lease that lapses this many seconds after "
        "its attempt's timeout, so a call that never reports (its worker was killed) "
        "cannot hold the slot for good.",
    )
    close_after_consecutive_successes: int = Field(
        default=DEFAULT_CLOSE_AFTER_CONSECUTIVE_SUCCESSES,
        ge=1,
        le=100,
        description="Good trials or probes in a row that close a half-open breaker; one bad "
        "trial re-opens it. A breaker never closes just because time passed.",
    )
    trial_latency_ms: float | None = Field(
        default=DEFAULT_TRIAL_LATENCY_MS,
        gt=0.0,
        description="A trial or probe is good only if it succeeded, was semantically valid "
        "and its time to first token (its latency when none was measured) is at most this "
        "many milliseconds. Null: a real-call trial uses its role's `ttft_budget_ms`, a "
        "probe the smallest `ttft_budget_ms` of the roles using the route.",
    )
    half_open_call_fraction: float = Field(
        default=DEFAULT_HALF_OPEN_CALL_FRACTION,
        ge=0.0,
        le=1.0,
        description="Share of real calls that may be a half-open route's trial: a drawn "
        "call tries the route in its tier slot (at most `half_open_max_trials` at a time) "
        "and fails over in the same call if the trial fails. 0: probes alone decide, and a "
        "half-open route is tried only when no closed route is left.",
    )
    consecutive_failures: int | None = Field(
        default=DEFAULT_CONSECUTIVE_FAILURES,
        ge=1,
        le=10_000,
        description="A closed breaker opens after this many failures in a row that count "
        "against the route (errors, timeouts, connection failures; not 429s, not semantic "
        "failures), whatever the error rate; any success resets the count. Null: the rates "
        "alone decide.",
    )
    consecutive_timeouts: int | None = Field(
        default=DEFAULT_CONSECUTIVE_TIMEOUTS,
        ge=1,
        le=10_000,
        description="A closed breaker opens after this many time-budget failures in a row "
        "(no first token within the TTFT budget, a stalled stream, no response); a success "
        "resets the count. Null: only `consecutive_failures` and the rates.",
    )
    probation_s: float | None = Field(
        default=DEFAULT_PROBATION_S,
        ge=0.0,
        le=86_400.0,
        description="Seconds after good trials close a breaker during which one failure "
        "re-opens it (reason `probation_failed`); an operator's release is not on "
        "probation. 0 turns probation off. Null: `open_duration_s`.",
    )

    @model_validator(mode="after")
    def _check_durations(self) -> BreakerSettings:
        if self.max_open_duration_s < self.open_duration_s:
            raise ValueError(
                f"max_open_duration_s ({self.max_open_duration_s}) must be >= "
                f"open_duration_s ({self.open_duration_s})"
            )
        return self

    def open_duration_for(self, trips: int) -> float:
        """Seconds a breaker stays open on its ``trips``-th consecutive trip (1-based).

        Grows geometrically so a route that keeps failing its trials is probed less
        often, capped so it is never forgotten.
        """
        exponent = max(trips, 1) - 1
        # Cap the exponent before pow so a long outage cannot overflow the float.
        if self.open_duration_multiplier > 1.0:
            limit = math.log(self.max_open_duration_s / self.open_duration_s) / math.log(
                self.open_duration_multiplier
            )
            exponent = min(exponent, math.ceil(limit))
        duration = self.open_duration_s * self.open_duration_multiplier**exponent
        return min(duration, self.max_open_duration_s)

    def probation(self) -> float:
        """Seconds after a close by good trials during which one failure re-opens."""
        return self.open_duration_s if self.probation_s is None else self.probation_s


def _inherited(name: str) -> str:
    """An override field's description: the shared setting's, and what leaving it out does."""
    shared = str(BreakerSettings.model_fields[name].description)
    # Null means "inherit" here, so the shared field's own meaning of null does not apply.
    meaning = shared.split(" Null:")[0]
    return f"{meaning} Null or absent: this route keeps the shared `breaker.{name}`."


class BreakerOverride(BaseModel):
    """Per-endpoint breaker settings: every field optional, merged over ``breaker``."""

    model_config = STRICT

    error_rate_threshold: float | None = Field(
        default=None, gt=0.0, le=1.0, description=_inherited("error_rate_threshold")
    )
    error_window_s: float | None = Field(
        default=None, gt=0.0, le=3600.0, description=_inherited("error_window_s")
    )
    min_calls: int | None = Field(
        default=None, ge=1, le=10_000, description=_inherited("min_calls")
    )
    slow_call_ms: float | None = Field(default=None, gt=0.0, description=_inherited("slow_call_ms"))
    slow_call_baseline_factor: float | None = Field(
        default=None, ge=1.0, le=100.0, description=_inherited("slow_call_baseline_factor")
    )
    slow_call_rate_threshold: float | None = Field(
        default=None, gt=0.0, le=1.0, description=_inherited("slow_call_rate_threshold")
    )
    p95_baseline_factor: float | None = Field(
        default=None, ge=1.0, le=100.0, description=_inherited("p95_baseline_factor")
    )
    semantic_failure_threshold: float | None = Field(
        default=None, gt=0.0, le=1.0, description=_inherited("semantic_failure_threshold")
    )
    semantic_window_s: float | None = Field(
        default=None, gt=0.0, le=3600.0, description=_inherited("semantic_window_s")
    )
    open_duration_s: float | None = Field(
        default=None, gt=0.0, le=86_400.0, description=_inherited("open_duration_s")
    )
    open_duration_multiplier: float | None = Field(
        default=None, ge=1.0, le=10.0, description=_inherited("open_duration_multiplier")
    )
    max_open_duration_s: float | None = Field(
        default=None, gt=0.0, le=86_400.0, description=_inherited("max_open_duration_s")
    )
    half_open_max_trials: int | None = Field(
        default=None, ge=1, le=100, description=_inherited("half_open_max_trials")
    )
    trial_lease_grace_s: float | None = Field(
        default=None, ge=0.0, le=3600.0, description=_inherited("trial_lease_grace_s")
    )
    close_after_consecutive_successes: int | None = Field(
        default=None, ge=1, le=100, description=_inherited("close_after_consecutive_successes")
    )
    trial_latency_ms: float | None = Field(
        default=None, gt=0.0, description=_inherited("trial_latency_ms")
    )
    half_open_call_fraction: float | None = Field(
        default=None, ge=0.0, le=1.0, description=_inherited("half_open_call_fraction")
    )
    consecutive_failures: int | None = Field(
        default=None, ge=1, le=10_000, description=_inherited("consecutive_failures")
    )
    consecutive_timeouts: int | None = Field(
        default=None, ge=1, le=10_000, description=_inherited("consecutive_timeouts")
    )
    probation_s: float | None = Field(
        default=None, ge=0.0, le=86_400.0, description=_inherited("probation_s")
    )

    def apply(self, base: BreakerSettings) -> BreakerSettings:
        """Return ``base`` with the fields set in this override replaced (and re-validated)."""
        merged = base.model_dump()
        # exclude_none, not exclude_unset: the policy travels through Temporal as JSON,
        # where every field comes back "set" (to null), and null means "inherit".
        merged.update(self.model_dump(exclude_none=True))
        return BreakerSettings.model_validate(merged)


class ProbeSettings(BaseModel):
    """The active health check: a tiny completion sent to every endpoint on an interval."""

    model_config = STRICT

    interval_s: float = Field(
        default=DEFAULT_PROBE_INTERVAL_S,
        ge=MIN_PROBE_INTERVAL_S,
        le=MAX_PROBE_INTERVAL_S,
        description="Seconds between two probe rounds. A closed route is probed only when no "
        "real call or probe finished on it for an interval, an open route every interval "
        "(a good probe makes it half-open), and no route while it cools down after a 429.",
    )
    timeout_s: float = Field(
        default=DEFAULT_PROBE_TIMEOUT_S,
        gt=0.0,
        le=600.0,
        description="Seconds one probe may take (first token and completion); a probe of an "
        "open or half-open route waits for its first token only up to the breaker's "
        "`trial_latency_ms`.",
    )
    max_tokens: int = Field(
        default=DEFAULT_PROBE_MAX_TOKENS,
        ge=1,
        le=256,
        description="Completion tokens a probe asks for: enough to validate the reply, cheap "
        "enough to run constantly.",
    )
    half_open_interval_s: float | None = Field(
        default=None,
        ge=MIN_PROBE_INTERVAL_S,
        le=MAX_PROBE_INTERVAL_S,
        description="Seconds between probes of a half-open route, until its "
        "`close_after_consecutive_successes` good probes close it. Null: `interval_s` / 4 "
        "(at least 1 s).",
    )

    def half_open_interval(self) -> float:
        """How often a half-open route is probed until it closes (faster than interval_s)."""
        if self.half_open_interval_s is not None:
            return self.half_open_interval_s
        return max(MIN_PROBE_INTERVAL_S, self.interval_s / HALF_OPEN_PROBE_SPEEDUP)
