"""SLA demotion with a hysteresis margin."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.config import LatencySLA
from agent_failover.resilience.contracts import RecentSample
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


# --- restoration by streak, and the dwell that keeps it from flapping -------------------

DEFAULT = LatencySLA(p95_ms=1000, p99_ms=2000)  # window 60 s, min_samples 10, restore_after 3


def sample(at: float, latency_ms: float, ok: bool = True) -> RecentSample:
    return RecentSample(at=at, latency_ms=latency_ms, ok=ok)


def slow_window() -> object:
    """The window that demoted the route: still full of slow samples."""
    return stats(p95_ms=3000, p99_ms=4000, latency_samples=12, calls=12)


def test_probes_alone_restore_at_default_settings() -> None:
    """Demoted at t=0 with min_samples 10; probes every 12 s (5 per 60 s window, never 10).
    Before: the verdict held forever. Now: the third good probe restores it, i.e. within
    interval x (restore_after + 1) = 48 s of the route recovering."""
    probes = stats(p95_ms=3000, p99_ms=4000, latency_samples=5, calls=5)
    recent: list[RecentSample] = []
    demoted, restored_at = True, None
    for k in range(1, 6):
        t = 12.0 * k
        recent.append(sample(t, 150.0))
        v = evaluate_sla(demoted, probes, DEFAULT, 0.8, recent=recent, since=0.0, now=t)
        if demoted and not v.demoted:
            restored_at = t
        demoted = v.demoted
    assert restored_at == 36.0 and restored_at <= 12.0 * (DEFAULT.restore_after + 1)


def test_streak_must_follow_the_demotion_and_stay_under_the_margin() -> None:
    """Samples from before the demotion, failures and samples between margin x SLA and the
    SLA do not count towards the restore streak."""
    before = [sample(1.0, 100.0), sample(2.0, 100.0), sample(3.0, 100.0)]
    assert evaluate_sla(True, slow_window(), DEFAULT, 0.8, recent=before, since=5.0, now=9).demoted
    in_band = [sample(10.0 + i, 900.0) for i in range(5)]  # < SLA but > 0.8 x SLA
    assert evaluate_sla(
        True, slow_window(), DEFAULT, 0.8, recent=in_band, since=5.0, now=20
    ).demoted
    broken = [sample(10, 100.0), sample(11, 100.0, ok=False), sample(12, 100.0), sample(13, 90.0)]
    assert evaluate_sla(True, slow_window(), DEFAULT, 0.8, recent=broken, since=5.0, now=20).demoted


def test_restored_route_does_not_flap_on_its_old_window() -> None:
    """Just restored (since=t): its 60 s window still breaches, but for one window only a
    streak of slow observations may demote it again."""
    fast = [sample(101.0, 200.0), sample(102.0, 250.0)]
    v = evaluate_sla(False, slow_window(), DEFAULT, 0.8, recent=fast, since=100.0, now=110.0)
    assert not v.demoted and "not trusted" in (v.reason or "")
    mixed = [sample(101.0, 1500.0), sample(102.0, 200.0), sample(103.0, 1500.0)]
    assert not evaluate_sla(
        False, slow_window(), DEFAULT, 0.8, recent=mixed, since=100.0, now=110.0
    ).demoted
    slow = [sample(101.0 + i, 1500.0) for i in range(3)]
    assert evaluate_sla(
        False, slow_window(), DEFAULT, 0.8, recent=slow, since=100.0, now=110
    ).demoted
    # After one window the percentiles are trusted again.
    assert evaluate_sla(
        False, slow_window(), DEFAULT, 0.8, recent=fast, since=100.0, now=161
    ).demoted


@PROPERTY
@given(
    st.lists(
        st.tuples(st.floats(min_value=0, max_value=3000), st.booleans()), min_size=1, max_size=40
    )
)
def test_no_restore_without_a_good_streak_or_good_percentiles(obs: list) -> None:
    """Starting demoted with a breaching window, the route comes back only after
    restore_after consecutive ok observations under margin x p95."""
    recent = [sample(10.0 + i, lat, ok) for i, (lat, ok) in enumerate(obs)]
    v = evaluate_sla(True, slow_window(), DEFAULT, 0.8, recent=recent, since=5.0, now=100.0)
    tail = recent[-DEFAULT.restore_after :]
    streak = len(tail) == DEFAULT.restore_after and all(s.ok and s.latency_ms < 800 for s in tail)
    assert v.demoted == (not streak)
