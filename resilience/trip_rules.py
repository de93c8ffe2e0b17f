"""Why a breaker moves, and the window rules that trip a closed one.

:class:`BreakerReason` names every move of :mod:`resilience.breaker`. :func:`rate_trip`
reads a route's :class:`~resilience.contracts.WindowStats` (computed by the stores through
:func:`resilience.aggregates.breaker_stats_from`) and says which window rule trips:

* the error rate over ``error_window_s``;
* the slow-call rate over the same window (calls slower than ``slow_call_ms``, or than
  ``slow_call_baseline_factor`` x the route's baseline p95);
* the window's p95 over ``p95_baseline_factor`` x the baseline p95 (seed 003's latency
  breaker: one call in five at 10x latency puts the p95 at 10x while the slow-call
  rate stays at 20 %);
* the semantic failure rate over ``semantic_window_s``.

Each needs ``min_calls`` calls in the window it reads. Pure: no clock, no IO.
"""

from __future__ import annotations

from enum import StrEnum

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import WindowStats


class BreakerReason(StrEnum):
    """Why a breaker moved (or why a call was rejected)."""

    ERROR_RATE = "error_rate"
    SLOW_CALLS = "slow_calls"
    #: The error window's p95 above factor x the route's baseline p95.
    P95_ABOVE_BASELINE = "p95_above_baseline"
    SEMANTIC_FAILURES = "semantic_failures"
    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    AUTH_FAILURE = "auth_failure"
    MODEL_NOT_FOUND = "model_not_found"
    OVERLOADED = "overloaded"
    CONSECUTIVE_FAILURES = "consecutive_failures"
    CONSECUTIVE_TIMEOUTS = "consecutive_timeouts"
    PROBATION_FAILED = "probation_failed"
    OPEN_DURATION_ELAPSED = "open_duration_elapsed"
    PROBE_SUCCEEDED = "probe_succeeded"
    TRIAL_FAILED = "trial_failed"
    TRIALS_PASSED = "trials_passed"
    #: Not a move: a half-open breaker refused a real call because every trial slot is
    #: held by a live lease (other trials in flight, or a dead worker's until it lapses).
    TRIAL_SLOTS_FULL = "trial_slots_full"
    FORCED_OPEN = "forced_open"
    FORCED_CLOSED = "forced_closed"
    RELEASED = "released"


_R = BreakerReason


def rate_trip(stats: WindowStats, s: BreakerSettings) -> BreakerReason | None:
    """Which window rule trips a closed breaker, if any.

    The error rate, the slow-call rate and the p95 over the baseline read the error window
    and need ``min_calls`` calls in it; the semantic failure rate reads its own (longer)
    window and needs ``min_calls`` calls in that one, so a route at 15 calls a minute is
    judged on its semantic failures even though 30 s hold fewer than 10 calls.
    """
    if stats.enough_samples:
        if stats.error_rate >= s.error_rate_threshold:
            return _R.ERROR_RATE
        if stats.slow_calls and stats.slow_call_rate >= s.slow_call_rate_threshold:
            return _R.SLOW_CALLS
        limit, p95 = stats.p95_limit_ms, stats.p95_ms
        if limit is not None and p95 is not None and p95 > limit:
            return _R.P95_ABOVE_BASELINE
    if (
        stats.semantic_calls >= s.min_calls
        and stats.semantic_failure_rate >= s.semantic_failure_threshold
    ):
        return _R.SEMANTIC_FAILURES
    return None
