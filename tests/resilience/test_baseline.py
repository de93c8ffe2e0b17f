"""The long-horizon latency baseline: a gradual slowdown trips, an always-slow route does not.

The slow-call breaker used to compare calls with the p95 of the last 10 minutes, which a
slow ramp drags along (a 30x ramp over 20 minutes never crossed 3x). These tests drive the
breaker on a fake clock exactly as the health store does, with the short baseline only
(the old rule, kept to show the failure) and with the chosen, slower-moving baseline.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.baseline import (
    BUCKET_S,
    HORIZON_HOURS,
    BaselineSource,
    HourlyLatency,
    bin_upper_ms,
    choose_baseline,
    histogram_percentile,
    latency_bin,
    long_horizon_p95,
)
from agent_failover.resilience.breaker import Breaker, BreakerReason, on_outcome
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState, CallOutcome
from agent_failover.resilience.percentile import percentile
from agent_failover.resilience.windows import RollingWindow, breaker_stats
from tests.resilience.helpers import PROPERTY, ok

S = BreakerSettings()  # slow = 3 x baseline p95, 50 % of calls over 30 s, min 10 calls
LATENCY_TRIPS = (BreakerReason.SLOW_CALLS, BreakerReason.P95_ABOVE_BASELINE)
HOUR0 = 472_222 * BUCKET_S  # an hour boundary
ROUTE = "r"


class Route:
    """One route fed one call per second, with the store's two baselines and a breaker."""

    def __init__(self, *, long_horizon: bool) -> None:
        self.long_horizon = long_horizon
        self.window = RollingWindow(horizon_s=600)
        self.hourly = HourlyLatency()
        self.breaker = Breaker(route=ROUTE)
        self.baseline_ms: float | None = None
        self.refreshed_at = -1e18
        self.tripped_at: float | None = None

    def _baseline(self, now: float) -> float | None:
        if now - self.refreshed_at >= 30.0:  # the stores' refresh interval
            held = [o.latency_ms for o in self.window.outcomes(now=now, window_s=600) if o.ok]
            short = percentile(held, 95) if len(held) >= S.min_calls else None
            long, n = self.hourly.p95(now=now, min_samples=S.min_calls)
            chosen = choose_baseline(short, long if self.long_horizon else None, n)
            self.baseline_ms, self.refreshed_at = chosen.used_ms, now
        return self.baseline_ms

    def call(self, at: float, latency_ms: float) -> None:
        outcome = CallOutcome(route=ROUTE, at=at, ok=True, latency_ms=latency_ms)
        self.window.add(outcome)
        self.hourly.add(outcome)
        recent = self.window.outcomes(now=at, window_s=S.error_window_s)
        stats = breaker_stats(recent, S, now=at, baseline_p95_ms=self._baseline(at))
        self.breaker, t = on_outcome(self.breaker, outcome, stats, S, at)
        if t is not None and t.reason in LATENCY_TRIPS and self.tripped_at is None:
            self.tripped_at = at


def jitter(i: int) -> float:
    """A deterministic +-20 % wobble so percentiles are not degenerate."""
    return 0.8 + 0.4 * ((i * 7919) % 101) / 100


def drive(route: Route, latency_at: callable, seconds: int) -> None:
    for i in range(seconds):
        route.call(HOUR0 + i, latency_at(i) * jitter(i))
        if route.tripped_at is not None:
            return


STEADY_S = 2 * 3600  # two completed hours of history
RAMP_S = 20 * 60


def ramp(i: int) -> float:
    """200 ms for two hours, then a linear climb to 30x (6 s) over 20 minutes, held."""
    if i < STEADY_S:
        return 200.0
    return 200.0 * (1 + 29 * min(1.0, (i - STEADY_S) / RAMP_S))


def test_thirty_x_ramp_trips_against_the_long_horizon() -> None:
    """The ramp trips a latency rule (the window p95 over 3x the baseline, or half the
    calls slow) within minutes, long before it reaches 30x."""
    route = Route(long_horizon=True)
    drive(route, ramp, STEADY_S + RAMP_S + 600)
    assert route.breaker.state is BreakerState.OPEN
    assert route.breaker.reason in LATENCY_TRIPS
    assert route.tripped_at is not None
    into_ramp = route.tripped_at - (HOUR0 + STEADY_S)
    assert 0 < into_ramp < RAMP_S / 2, into_ramp


def test_the_same_ramp_never_trips_against_the_ten_minute_baseline() -> None:
    """The old rule: the short baseline follows the ramp, so 3x is never crossed."""
    route = Route(long_horizon=False)
    drive(route, ramp, STEADY_S + RAMP_S + 600)
    assert route.tripped_at is None and route.breaker.state is BreakerState.CLOSED


def test_a_route_that_was_always_slow_never_trips() -> None:
    """6 s from the start: its own history says 6 s is normal."""
    route = Route(long_horizon=True)
    drive(route, lambda i: 6000.0, STEADY_S + RAMP_S + 600)
    assert route.tripped_at is None and route.breaker.state is BreakerState.CLOSED


def test_current_hour_is_left_out_of_the_long_horizon() -> None:
    """Samples of the hour in progress do not move the baseline; completed hours do."""
    h = HourlyLatency()
    for i in range(50):
        h.add(ok(ROUTE, HOUR0 + i, 100.0))
    assert h.p95(now=HOUR0 + 100, min_samples=10) == (None, 0)
    for i in range(50):
        h.add(ok(ROUTE, HOUR0 + 200 + i, 9000.0))  # still the same hour
    p95, n = h.p95(now=HOUR0 + BUCKET_S + 1, min_samples=10)
    assert n == 100 and p95 is not None and p95 >= 9000.0


def test_probes_and_failures_do_not_feed_the_long_horizon() -> None:
    """Only successful real calls count: probes are tiny and would pull the baseline down."""
    h = HourlyLatency()
    h.add(ok(ROUTE, HOUR0, 50.0, probe=True))
    h.add(CallOutcome(route=ROUTE, at=HOUR0, ok=False, latency_ms=30_000.0))
    assert h.buckets == {}


def test_buckets_older_than_seven_days_are_dropped() -> None:
    """Memory stays bounded: hours behind the horizon are pruned on write."""
    h = HourlyLatency()
    h.add(ok(ROUTE, HOUR0, 100.0))
    h.add(ok(ROUTE, HOUR0 + 200 * BUCKET_S, 100.0))
    assert list(h.buckets) == [int((HOUR0 + 200 * BUCKET_S) // BUCKET_S)]


def test_choose_prefers_the_long_horizon() -> None:
    """Long when it exists, else short, else none."""
    assert choose_baseline(300.0, 200.0, 500).source is BaselineSource.LONG
    assert choose_baseline(300.0, None).used_ms == 300.0
    assert choose_baseline(None, None).source is BaselineSource.NONE


@PROPERTY
@given(st.lists(st.floats(min_value=0.5, max_value=600_000), min_size=1, max_size=300))
def test_histogram_p95_is_within_one_bin_of_the_exact_p95(values: list[float]) -> None:
    """Log bins of ratio 1.1: the histogram's p95 is the exact p95's bin edge (<= 10 % above)."""
    hist: dict[int, int] = {}
    for v in values:
        hist[latency_bin(v)] = hist.get(latency_bin(v), 0) + 1
    exact = percentile(values, 95)
    approx = histogram_percentile(hist, 95)
    assert exact is not None and approx is not None
    assert exact <= approx + 1e-6 and approx <= max(exact, 1.0) * 1.1 + 1e-6
    assert approx == bin_upper_ms(latency_bin(exact))


def test_long_horizon_needs_min_samples() -> None:
    """Too few calls in the horizon: no long baseline (ordinary variance is not slowness)."""
    buckets = {int(HOUR0 // BUCKET_S): {latency_bin(100.0): 5}}
    assert long_horizon_p95(buckets, now=HOUR0 + BUCKET_S, min_samples=10) == (None, 5)


@PROPERTY
@given(st.lists(st.floats(min_value=-20.0, max_value=400.0), min_size=1, max_size=40))
def test_hours_are_pruned_as_a_walk_on_every_write_would(hours) -> None:
    """The expired hours are dropped only when the horizon moves, yet after every write
    the buckets are exactly those a walk over all of them would leave, calls arriving out
    of order included."""
    h = HourlyLatency()
    expected: dict[int, int] = {}
    for offset in hours:
        at = HOUR0 + offset * BUCKET_S
        h.add(ok(ROUTE, at, 100.0))
        hour = int(at // BUCKET_S)
        expected[hour] = expected.get(hour, 0) + 1
        expected = {k: n for k, n in expected.items() if k >= hour - HORIZON_HOURS}
        assert {k: sum(b.values()) for k, b in h.buckets.items()} == expected
