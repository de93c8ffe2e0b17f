"""A role's latency objective: the p95/p99 a route must hold or be demoted before it times out.

:class:`LatencySLA` is evaluated by :mod:`resilience.sla` over a rolling window of each
route's latencies, with hysteresis (the policy's ``hysteresis_margin``) so a route at the
line does not flap. A demoted route gets almost no real traffic, so it comes back through
a streak of good observations (probes or calls); :data:`MAX_SLA_STREAK` bounds every such
streak, the shadow evaluation's included, because the streaks travel in workflow history.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from agent_failover.resilience.config.validation import STRICT

DEFAULT_SLA_P95_MS = 10_000.0
DEFAULT_SLA_P99_MS = 20_000.0
DEFAULT_SLA_WINDOW_S = 60.0
DEFAULT_SLA_MIN_SAMPLES = 10
#: Consecutive good observations (probes or calls) that restore a latency-demoted route.
DEFAULT_SLA_RESTORE_AFTER = 3
#: Most observations the restore / re-demote streaks may need (bounded: they travel in history).
MAX_SLA_STREAK = 16


class LatencySLA(BaseModel):
    """A role's latency objective; a route breaching it is demoted before it times out."""

    model_config = STRICT

    p95_ms: float = Field(
        default=DEFAULT_SLA_P95_MS,
        gt=0.0,
        description="Latency objective in milliseconds: a route whose rolling p95 exceeds it "
        "is demoted, moved behind every healthy route (still tried, last) before any call "
        "to it times out.",
    )
    p99_ms: float = Field(
        default=DEFAULT_SLA_P99_MS,
        gt=0.0,
        description="The same objective for the rolling p99, in milliseconds; at least `p95_ms`.",
    )
    window_s: float = Field(
        default=DEFAULT_SLA_WINDOW_S,
        gt=0.0,
        le=3600.0,
        description="Seconds of recent latencies the SLA percentiles are computed over.",
    )
    min_samples: int = Field(
        default=DEFAULT_SLA_MIN_SAMPLES,
        ge=1,
        le=10_000,
        description="Latency samples the window needs before its percentiles can change the "
        "verdict (the restore and re-demote streaks still can).",
    )
    restore_after: int = Field(
        default=DEFAULT_SLA_RESTORE_AFTER,
        ge=1,
        le=MAX_SLA_STREAK,
        description="A demoted route is restored after this many consecutive observations "
        "since the demotion (probes or calls), each successful and under "
        "`hysteresis_margin` x `p95_ms`. For one `window_s` after a verdict changes, only "
        "this many consecutive observations over `p95_ms` demote a restored route again.",
    )

    @model_validator(mode="after")
    def _check_order(self) -> LatencySLA:
        if self.p99_ms < self.p95_ms:
            raise ValueError(f"p99_ms ({self.p99_ms}) must be >= p95_ms ({self.p95_ms})")
        return self
