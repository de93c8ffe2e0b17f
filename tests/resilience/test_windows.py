"""Rolling windows and exact nearest-rank statistics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.windows import (
    RollingWindow,
    breaker_stats,
    compute_stats,
    slow_call_threshold_ms,
)
from tests.resilience.helpers import PROPERTY, fail, ok, reference_percentile


def test_window_bounds_by_count_and_horizon() -> None:
    """The window never holds more than max_samples nor anything older than the horizon."""
    w = RollingWindow(max_samples=5, horizon_s=10.0)
    for t in range(8):
        w.add(ok("r", at=float(t)))
    assert len(w) == 5
    w.add(ok("r", at=100.0))
    assert len(w) == 1
    assert [o.at for o in w.outcomes(now=100.0, window_s=30.0)] == [100.0]


def test_window_filters_by_time() -> None:
    """outcomes() returns only those inside [now - window, now]."""
    w = RollingWindow()
    for t in (0.0, 10.0, 20.0, 30.0):
        w.add(ok("r", at=t))
    assert [o.at for o in w.outcomes(now=30.0, window_s=15.0)] == [20.0, 30.0]
    assert [o.at for o in w.outcomes(now=10.0, window_s=100.0)] == [0.0, 10.0]


def test_window_rejects_bad_bounds() -> None:
    """A window needs a positive size and horizon."""
    with pytest.raises(ValueError):
        RollingWindow(max_samples=0)
    with pytest.raises(ValueError):
        RollingWindow(horizon_s=0)


@PROPERTY
@given(
    st.lists(
        st.tuples(
            st.booleans(),  # ok
            st.booleans(),  # semantic failure (when not ok)
            st.booleans(),  # counts against route
            st.floats(min_value=0, max_value=60),  # age
            st.floats(min_value=0, max_value=10_000),  # latency
        ),
        max_size=60,
    )
)
def test_stats_match_reference(rows: list[tuple[bool, bool, bool, float, float]]) -> None:
    """Counts, rates and percentiles equal a direct computation over the window."""
    now = 1000.0
    outcomes = []
    for good, semantic, counts, age, latency in rows:
        if good:
            outcomes.append(ok("r", now - age, latency, counts_against_route=counts))
        else:
            outcomes.append(
                fail("r", now - age, latency_ms=latency, semantic_failure=semantic,
                     counts_against_route=counts)
            )  # fmt: skip
    s = compute_stats(outcomes, now=now, window_s=30.0, min_calls=5, slow_call_ms=5000.0)
    inside = [o for o in outcomes if now - 30.0 <= o.at <= now and o.counts_against_route]
    errors = [o for o in inside if not o.ok and not o.semantic_failure]
    assert s.calls == len(inside)
    assert s.errors == len(errors)
    assert s.semantic_failures == sum(o.semantic_failure for o in inside)
    assert s.slow_calls == sum(o.latency_ms > 5000.0 for o in inside)
    assert s.enough_samples == (len(inside) >= 5)
    if inside:
        assert s.error_rate == pytest.approx(len(errors) / len(inside))
        assert s.p95_ms == reference_percentile([o.latency_ms for o in inside], 95)
    else:
        assert s.error_rate == 0.0 and s.p95_ms is None


def test_stats_exclude_caller_faults_and_flag_probes() -> None:
    """Content-filter style outcomes leave the error rate alone; probes feed latency."""
    now = 100.0
    outcomes = [
        ok("r", 99.0, 100.0),
        ok("r", 99.0, 900.0, probe=True),
        fail("r", 99.0, ErrorClass.CONTENT_FILTER, counts_against_route=False),
    ]
    s = compute_stats(outcomes, now=now, window_s=30.0, min_calls=1)
    assert (s.calls, s.errors, s.error_rate, s.probes) == (2, 0, 0.0, 1)
    assert s.p99_ms == 900.0 and s.latency_samples == 2


def test_stats_ttft_percentiles() -> None:
    """TTFT percentiles come from the outcomes that reported one."""
    outcomes = [ok("r", 10.0, 500.0, ttft_ms=float(t)) for t in range(1, 21)]
    outcomes.append(ok("r", 10.0, 500.0))
    s = compute_stats(outcomes, now=10.0, window_s=30.0, min_calls=1)
    assert (s.ttft_p50_ms, s.ttft_p95_ms) == (10.0, 19.0)


def test_breaker_stats_use_the_semantic_window() -> None:
    """Semantic failures count over semantic_window_s even when older than the error window."""
    settings = BreakerSettings()
    now = 1000.0
    outcomes = [fail("r", now - 45, semantic_failure=True, error_class=ErrorClass.EMPTY_OUTPUT)]
    outcomes += [ok("r", now - 1) for _ in range(9)]
    s = breaker_stats(outcomes, settings, now=now)
    assert s.calls == 9 and s.errors == 0
    assert s.semantic_failures == 1 and s.semantic_failure_rate == pytest.approx(0.1)


def test_slow_call_threshold() -> None:
    """An absolute slow_call_ms wins; otherwise factor x baseline; no baseline disables it."""
    assert slow_call_threshold_ms(BreakerSettings(slow_call_ms=700), 100.0) == 700
    assert slow_call_threshold_ms(BreakerSettings(), 1000.0) == 3000.0
    assert slow_call_threshold_ms(BreakerSettings(), None) is None
