"""SLA demotion with a hysteresis margin."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.config import LatencySLA
from agent_failover.resilience.sla import evaluate_sla
from tests.resilience.helpers import PROPERTY, stats

SLA = LatencySLA(p95_ms=1000, p99_ms=2000, window_s=60, min_samples=10)


def test_breach_demotes() -> None:
    """A p95 or p99 above the SLA demotes the route."""
    assert evaluate_sla(False, stats(p95_ms=1001, p99_ms=1500), SLA, 0.8).demoted
    assert evaluate_sla(False, stats(p95_ms=900, p99_ms=2500), SLA, 0.8).demoted


def test_restore_needs_both_below_margin() -> None:
    """A demoted route is restored only when p95 and p99 are under margin x thresholds."""
    assert evaluate_sla(True, stats(p95_ms=900, p99_ms=1500), SLA, 0.8).demoted
    assert evaluate_sla(True, stats(p95_ms=700, p99_ms=1700), SLA, 0.8).demoted
    assert not evaluate_sla(True, stats(p95_ms=799, p99_ms=1599), SLA, 0.8).demoted


def test_not_enough_samples_keeps_previous() -> None:
    """Below min_samples there is no evidence and the previous verdict holds."""
    thin = stats(p95_ms=5000, p99_ms=9000, latency_samples=3, calls=3)
    assert not evaluate_sla(False, thin, SLA, 0.8).demoted
    assert evaluate_sla(
        True, stats(p95_ms=1, p99_ms=1, latency_samples=3, calls=3), SLA, 0.8
    ).demoted


def test_bad_margin_rejected() -> None:
    """The margin must be a fraction."""
    with pytest.raises(ValueError):
        evaluate_sla(False, stats(p95_ms=1, p99_ms=1), SLA, 1.5)


@PROPERTY
@given(
    st.lists(st.floats(min_value=800.0, max_value=1000.0), min_size=1, max_size=50),
    st.booleans(),
)
def test_no_flapping_inside_the_band(p95s: list[float], start: bool) -> None:
    """A p95 oscillating between margin x threshold and the threshold never flips the verdict."""
    demoted = start
    for p95 in p95s:
        demoted_next = evaluate_sla(demoted, stats(p95_ms=p95, p99_ms=p95), SLA, 0.8).demoted
        assert demoted_next == demoted
        demoted = demoted_next
