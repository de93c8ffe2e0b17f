"""Circuit breaker: transition laws (property tests) and seeded scenarios on a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_failover.resilience.admission import admit
from agent_failover.resilience.breaker import (
    TRANSITIONS,
    Breaker,
    BreakerReason,
    IllegalTransition,
    TrialLease,
    force,
    on_outcome,
    release_trial,
    tick,
    transition,
)
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState, CallOutcome, WindowStats
from agent_failover.resilience.errors import CLASSIFICATION, ErrorClass
from agent_failover.resilience.windows import RollingWindow, breaker_stats
from tests.resilience.conftest import FakeClock
from tests.resilience.helpers import fail, ok, rate_limited, stats

# The rate rules alone: the in-a-row rules (consecutive_*) have their own tests below.
S = BreakerSettings(consecutive_failures=None, consecutive_timeouts=None)
ROUTE = "anthropic-us-east"
ALL_STATES = list(BreakerState)
ALL_REASONS = list(BreakerReason)


class Driver:
    """Feeds outcomes through a real rolling window, as the health store does."""

    def __init__(
        self, clock: FakeClock, settings: BreakerSettings = S, baseline_p95_ms: float | None = None
    ) -> None:
        self.clock = clock
        self.settings = settings
        self.baseline_p95_ms = baseline_p95_ms
        self.window = RollingWindow()
        self.breaker = Breaker(route=ROUTE, since=clock.now)
        self.transitions = []

    def record(self, outcome: CallOutcome) -> None:
        """Add the outcome to the window and let the breaker see it."""
        self.window.add(outcome)
        s = breaker_stats(self.window.outcomes(now=self.clock.now, window_s=600),
                          self.settings, now=self.clock.now,
                          baseline_p95_ms=self.baseline_p95_ms)  # fmt: skip
        self.breaker, t = on_outcome(self.breaker, outcome, s, self.settings, self.clock.now)
        if t:
            self.transitions.append(t)

    def admit(self):
        """Ask for admission, keeping the returned breaker."""
        self.breaker, adm, t = admit(self.breaker, self.settings, self.clock.now)
        if t:
            self.transitions.append(t)
        return adm


# --- scenarios (the seeds) ------------------------------------------------------------


def test_fifteen_percent_errors_over_thirty_seconds_opens(clock: FakeClock) -> None:
    """The 3rd error in 20 calls within 30 s (15%) trips the breaker on ERROR_RATE."""
    d = Driver(clock)
    for _ in range(17):
        clock.advance(1.4)
        d.record(ok(ROUTE, clock.now))
    for _ in range(2):
        clock.advance(1.4)
        d.record(fail(ROUTE, clock.now))
    assert d.breaker.state is BreakerState.CLOSED  # 2/19 = 10.5%
    clock.advance(1.4)
    d.record(fail(ROUTE, clock.now))
    assert d.breaker.state is BreakerState.OPEN  # 3/20 = 15%
    assert d.breaker.reason is BreakerReason.ERROR_RATE
    assert d.breaker.open_until == pytest.approx(clock.now + 30.0)
    assert d.transitions[-1].from_state is BreakerState.CLOSED


def test_below_min_calls_never_trips_on_rate(clock: FakeClock) -> None:
    """Fewer than min_calls outcomes cannot trip the breaker even at 100% errors."""
    d = Driver(clock)
    for _ in range(S.min_calls - 1):
        clock.advance(1)
        d.record(fail(ROUTE, clock.now))
    assert d.breaker.state is BreakerState.CLOSED
    clock.advance(1)
    d.record(fail(ROUTE, clock.now))
    assert d.breaker.state is BreakerState.OPEN


def test_errors_outside_the_window_do_not_count(clock: FakeClock) -> None:
    """Errors older than error_window_s have left the window and cannot trip it."""
    d = Driver(clock)
    for _ in range(3):
        clock.advance(0.1)
        d.record(fail(ROUTE, clock.now))
    clock.advance(31)
    for _ in range(12):
        clock.advance(0.5)
        d.record(ok(ROUTE, clock.now))
    assert d.breaker.state is BreakerState.CLOSED


def trip(d: Driver) -> None:
    for _ in range(S.min_calls):
        d.clock.advance(0.1)
        d.record(fail(ROUTE, d.clock.now))
    assert d.breaker.state is BreakerState.OPEN


def test_three_good_probes_close(clock: FakeClock) -> None:
    """After open_duration the breaker is half-open and 3 good probes close it."""
    d = Driver(clock)
    trip(d)
    clock.advance(29.9)
    assert not d.admit().permitted
    clock.advance(0.2)
    d.breaker, t = tick(d.breaker, clock.now)
    assert t is not None and t.reason is BreakerReason.OPEN_DURATION_ELAPSED
    for n in range(3):
        assert d.breaker.state is BreakerState.HALF_OPEN, n
        clock.advance(12)
        d.record(ok(ROUTE, clock.now, 300.0, probe=True))
    assert d.breaker.state is BreakerState.CLOSED
    assert d.breaker.reason is BreakerReason.TRIALS_PASSED
    assert d.breaker.trips == 0


def test_bad_trial_reopens_for_longer(clock: FakeClock) -> None:
    """Open duration grows x2 per consecutive trip and is capped at max_open_duration_s."""
    d = Driver(clock)
    trip(d)
    durations = []
    for _ in range(6):
        durations.append(d.breaker.open_until - clock.now)
        clock.now = d.breaker.open_until
        adm = d.admit()
        assert adm.permitted and adm.trial
        clock.advance(1)
        d.record(fail(ROUTE, clock.now, trial=True))
        assert d.breaker.state is BreakerState.OPEN
        assert d.breaker.reason is BreakerReason.TRIAL_FAILED
    assert durations == pytest.approx([30, 60, 120, 240, 300, 300])


def test_rate_limit_cools_down_for_retry_after_without_tripping(clock: FakeClock) -> None:
    """A 429 + Retry-After cools the route down for exactly Retry-After; the breaker stays
    closed (before: it opened for max(open_duration, Retry-After) = 30 s for a 1 s 429)."""
    d = Driver(clock)
    d.record(rate_limited(ROUTE, clock.now, retry_after_s=1.0))
    assert d.breaker.state is BreakerState.CLOSED and d.breaker.open_until is None
    assert d.breaker.cooldown_until == pytest.approx(clock.now + 1.0)
    assert d.admit().permitted, "admission ignores the cool-down (the same-route retry)"


def test_overload_retry_after_sets_the_minimum_open_time(clock: FakeClock) -> None:
    """A 529 with Retry-After opens at once, for at least Retry-After seconds."""
    d = Driver(clock)
    d.record(fail(ROUTE, clock.now, ErrorClass.OVERLOADED, retry_after_s=120.0))
    assert (d.breaker.state, d.breaker.reason) == (BreakerState.OPEN, BreakerReason.OVERLOADED)
    assert d.breaker.open_until == pytest.approx(clock.now + 120.0)
    d2 = Driver(FakeClock())
    d2.record(fail(ROUTE, d2.clock.now, ErrorClass.OVERLOADED, retry_after_s=2.0))
    assert d2.breaker.open_until == pytest.approx(d2.clock.now + 30.0)


def test_rate_limits_never_trip_however_many(clock: FakeClock) -> None:
    """Even a stream of 429s (with or without Retry-After) leaves the breaker closed."""
    d = Driver(clock)
    for i in range(40):
        clock.advance(0.5)
        d.record(rate_limited(ROUTE, clock.now, retry_after_s=None if i % 2 else 2.0))
    assert d.breaker.state is BreakerState.CLOSED and d.transitions == []


def test_cool_down_only_extends(clock: FakeClock) -> None:
    """A shorter Retry-After never shortens a cool-down already in place."""
    d = Driver(clock)
    d.record(rate_limited(ROUTE, clock.now, retry_after_s=10.0))
    d.record(rate_limited(ROUTE, clock.now + 1, retry_after_s=2.0))
    assert d.breaker.cooldown_until == pytest.approx(clock.now + 10.0)


def test_rate_limited_half_open_trial_is_not_a_verdict(clock: FakeClock) -> None:
    """A probe or trial that meets a 429 neither re-opens nor closes a half-open breaker."""
    d = Driver(clock)
    trip(d)
    clock.now = d.breaker.open_until
    assert d.admit().trial
    d.record(rate_limited(ROUTE, clock.now, retry_after_s=3.0, trial=True, probe=True))
    assert d.breaker.state is BreakerState.HALF_OPEN and d.breaker.trials_in_flight(clock.now) == 0
    assert d.breaker.cooldown_until == pytest.approx(clock.now + 3.0)


@pytest.mark.parametrize(
    ("error_class", "reason"),
    [
        (ErrorClass.AUTH, BreakerReason.AUTH_FAILURE),
        (ErrorClass.QUOTA_EXHAUSTED, BreakerReason.QUOTA_EXHAUSTED),
        (ErrorClass.MODEL_NOT_FOUND, BreakerReason.MODEL_NOT_FOUND),
    ],
)
def test_auth_and_quota_trip_immediately(
    clock: FakeClock, error_class: ErrorClass, reason: BreakerReason
) -> None:
    """One auth, quota or model-not-found error opens the breaker without waiting for a
    rate; the reason says the route is misconfigured (shown by ``failover status``)."""
    d = Driver(clock)
    d.record(fail(ROUTE, clock.now, error_class))
    assert (d.breaker.state, d.breaker.reason) == (BreakerState.OPEN, reason)


def test_slow_calls_trip(clock: FakeClock) -> None:
    """Half the calls slower than slow_call_ms trips on SLOW_CALLS."""
    d = Driver(clock, BreakerSettings(slow_call_ms=1000))
    for i in range(10):
        clock.advance(1)
        d.record(ok(ROUTE, clock.now, 5000.0 if i % 2 else 100.0))
    assert d.breaker.reason is BreakerReason.SLOW_CALLS


def test_one_call_in_five_at_ten_x_trips_on_the_window_p95(clock: FakeClock) -> None:
    """Baseline p95 200 ms, a call a second, every fifth at 2 s: the window p95 is 10x the
    baseline, so the breaker opens as soon as the window holds min_calls calls, although
    only 20 % of them are slow (before: the slow-call rate's 50 % was never reached)."""
    d = Driver(clock, baseline_p95_ms=200.0)
    opened_after = None
    for i in range(1, 31):
        clock.advance(1)
        d.record(ok(ROUTE, clock.now, 2000.0 if i % 5 == 0 else 200.0))
        if d.breaker.state is BreakerState.OPEN:
            opened_after = i
            break
    assert opened_after == S.min_calls
    assert d.breaker.reason is BreakerReason.P95_ABOVE_BASELINE


def test_window_p95_needs_min_calls(clock: FakeClock) -> None:
    """Fewer than min_calls calls in the error window never trip on the p95."""
    d = Driver(clock, baseline_p95_ms=200.0)
    for _ in range(S.min_calls - 1):
        clock.advance(1)
        d.record(ok(ROUTE, clock.now, 5000.0))
    assert d.breaker.state is BreakerState.CLOSED


def test_p95_within_three_x_the_baseline_does_not_trip(clock: FakeClock) -> None:
    """Every call at 2.9x the baseline: the p95 stays under the line, and null turns the
    rule off whatever the latency."""
    d = Driver(clock, baseline_p95_ms=200.0)
    off = Driver(clock, BreakerSettings(**{**S.model_dump(), "p95_baseline_factor": None}), 200.0)
    for _ in range(30):
        clock.advance(1)
        d.record(ok(ROUTE, clock.now, 580.0))
        off.record(ok(ROUTE, clock.now, 5000.0 if clock.now % 5 == 0 else 200.0))
    assert d.breaker.state is BreakerState.CLOSED and off.breaker.state is BreakerState.CLOSED


def test_half_invalid_outputs_at_fifteen_calls_a_minute_open(clock: FakeClock) -> None:
    """One call every 4 s, every other one semantically invalid: 30 s hold fewer than
    min_calls calls, but the semantic window's 60 s hold 15, so the breaker opens on
    SEMANTIC_FAILURES within a minute (before: the minimum was counted in the 30 s error
    window and it never opened)."""
    d = Driver(clock)
    opened_at = None
    for i in range(1, 46):  # three minutes
        clock.advance(4)
        if i % 2:
            d.record(fail(ROUTE, clock.now, ErrorClass.INVALID_OUTPUT, semantic_failure=True))
        else:
            d.record(ok(ROUTE, clock.now))
        if d.breaker.state is BreakerState.OPEN:
            opened_at = i * 4
            break
    assert opened_at is not None and opened_at <= 60, opened_at
    assert d.breaker.reason is BreakerReason.SEMANTIC_FAILURES


def test_semantic_failures_trip(clock: FakeClock) -> None:
    """10% semantic failures over 60 s trips on SEMANTIC_FAILURES."""
    d = Driver(clock)
    for i in range(10):
        clock.advance(1)
        if i == 4:
            d.record(fail(ROUTE, clock.now, ErrorClass.INVALID_OUTPUT, semantic_failure=True))
        else:
            d.record(ok(ROUTE, clock.now))
    assert d.breaker.reason is BreakerReason.SEMANTIC_FAILURES


def test_caller_faults_never_trip(clock: FakeClock) -> None:
    """Content-filter and context-length failures do not count against the route."""
    d = Driver(clock)
    for _ in range(30):
        clock.advance(0.5)
        d.record(fail(ROUTE, clock.now, ErrorClass.CONTENT_FILTER, counts_against_route=False))
    assert d.breaker.state is BreakerState.CLOSED


def test_half_open_trial_budget(clock: FakeClock) -> None:
    """Half-open admits at most half_open_max_trials concurrent trials; release frees one."""
    d = Driver(clock)
    trip(d)
    clock.now = d.breaker.open_until
    admitted = [d.admit() for _ in range(S.half_open_max_trials)]
    assert all(a.permitted and a.trial for a in admitted)
    rejected = d.admit()
    assert not rejected.permitted
    assert "half_open" in str(rejected) and ROUTE in str(rejected)
    d.breaker = release_trial(d.breaker, clock.now)
    assert d.admit().permitted


def test_slow_trial_is_bad(clock: FakeClock) -> None:
    """With trial_latency_ms set, a successful but slow trial reopens the breaker."""
    settings = BreakerSettings(trial_latency_ms=500)
    d = Driver(clock, settings)
    trip(d)
    clock.now = d.breaker.open_until
    assert d.admit().trial
    d.record(ok(ROUTE, clock.now, 900.0, trial=True))
    assert d.breaker.reason is BreakerReason.TRIAL_FAILED


def test_trial_judged_on_time_to_first_token(clock: FakeClock) -> None:
    """The line is a TTFT line: a long answer that started fast is a good trial, a slow
    first token is not, even when the whole call was quick."""
    settings = BreakerSettings(trial_latency_ms=2000, close_after_consecutive_successes=1)
    d = Driver(clock, settings)
    trip(d)
    clock.now = d.breaker.open_until
    assert d.admit().trial
    d.record(ok(ROUTE, clock.now, 9000.0, ttft_ms=400.0, trial=True))
    assert d.breaker.state is BreakerState.CLOSED
    d2 = Driver(FakeClock(), settings)
    trip(d2)
    d2.clock.now = d2.breaker.open_until
    assert d2.admit().trial
    d2.record(ok(ROUTE, d2.clock.now, 2500.0, ttft_ms=2400.0, trial=True))
    assert d2.breaker.reason is BreakerReason.TRIAL_FAILED


def test_open_rejection_names_route_state_and_time(clock: FakeClock) -> None:
    """A rejection says which breaker, in which state, and until when."""
    d = Driver(clock)
    trip(d)
    adm = d.admit()
    assert not adm.permitted and adm.retry_at == d.breaker.open_until
    assert adm.state is BreakerState.OPEN and adm.reason is BreakerReason.ERROR_RATE
    assert f"'{ROUTE}' is open (error_rate) until" in str(adm)


def test_retry_after_extends_an_open_breaker(clock: FakeClock) -> None:
    """A later overload Retry-After while open pushes open_until out, never in."""
    d = Driver(clock)
    trip(d)
    first = d.breaker.open_until
    d.record(fail(ROUTE, clock.now, ErrorClass.OVERLOADED, retry_after_s=5.0))
    assert d.breaker.open_until == first
    d.record(fail(ROUTE, clock.now, ErrorClass.OVERLOADED, retry_after_s=100.0))
    assert d.breaker.open_until == pytest.approx(clock.now + 100.0)
    assert d.breaker.state is BreakerState.OPEN


# --- opening fast: failures in a row, probation after a close ---------------------------

IN_A_ROW = BreakerSettings(consecutive_failures=5, consecutive_timeouts=None)


def _healthy_history(d: Driver, n: int = 60) -> None:
    for _ in range(n):
        d.clock.advance(0.25)
        d.record(ok(ROUTE, d.clock.now))


def test_five_failures_in_a_row_open_below_the_error_rate(clock: FakeClock) -> None:
    """After 60 good calls, 5 failures in a row open the breaker (5/65 = 7.7% < 15%)."""
    d = Driver(clock, IN_A_ROW)
    _healthy_history(d)
    for n in range(4):
        clock.advance(0.25)
        d.record(fail(ROUTE, clock.now, ErrorClass.OVERLOADED))
        assert d.breaker.state is BreakerState.CLOSED, n
    clock.advance(0.25)
    d.record(fail(ROUTE, clock.now, ErrorClass.SLOW_FIRST_TOKEN))
    assert d.breaker.state is BreakerState.OPEN
    assert d.breaker.reason is BreakerReason.CONSECUTIVE_FAILURES
    assert d.breaker.consecutive_failures == 0


def test_fewer_timeouts_in_a_row_open(clock: FakeClock) -> None:
    """Time-budget failures (slow first token, stalled stream, no response) open after
    consecutive_timeouts in a row; a success resets them, other failures do not."""
    d = Driver(clock, BreakerSettings(consecutive_failures=5, consecutive_timeouts=2))
    _healthy_history(d)
    for outcome in (
        fail(ROUTE, clock.now, ErrorClass.SLOW_FIRST_TOKEN),
        ok(ROUTE, clock.now),
        fail(ROUTE, clock.now, ErrorClass.STREAM_STALLED),
        fail(ROUTE, clock.now, ErrorClass.SERVER_ERROR),
    ):
        d.record(outcome)
        assert d.breaker.state is BreakerState.CLOSED
    assert d.breaker.consecutive_timeouts == 1
    d.record(fail(ROUTE, clock.now, ErrorClass.NO_RESPONSE))
    assert d.breaker.state is BreakerState.OPEN
    assert d.breaker.reason is BreakerReason.CONSECUTIVE_TIMEOUTS
    assert d.breaker.consecutive_timeouts == 0


def test_a_success_resets_the_count(clock: FakeClock) -> None:
    """4 failures, a success, 4 failures: never 5 in a row, so it stays closed."""
    d = Driver(clock, IN_A_ROW)
    _healthy_history(d)
    for good in (False, False, False, False, True, False, False, False, False):
        clock.advance(0.25)
        d.record(ok(ROUTE, clock.now) if good else fail(ROUTE, clock.now))
    assert d.breaker.state is BreakerState.CLOSED
    assert d.breaker.consecutive_failures == 4


def test_rate_limits_and_semantic_failures_are_not_counted_in_a_row(clock: FakeClock) -> None:
    """429s cool the route down and semantic failures have their own rate: neither counts."""
    d = Driver(clock, IN_A_ROW)
    _healthy_history(d, 200)
    for _ in range(10):
        clock.advance(0.25)
        d.record(rate_limited(ROUTE, clock.now, retry_after_s=0.1))
        d.record(fail(ROUTE, clock.now, ErrorClass.EMPTY_OUTPUT, semantic_failure=True))
    assert d.breaker.state is BreakerState.CLOSED
    assert d.breaker.consecutive_failures == 0


def test_no_in_a_row_rule_when_disabled(clock: FakeClock) -> None:
    """consecutive_failures None: only the window's rates open the breaker."""
    d = Driver(clock, BreakerSettings(consecutive_failures=None))
    _healthy_history(d)
    for _ in range(10):
        clock.advance(0.25)
        d.record(fail(ROUTE, clock.now))
    assert d.breaker.state is BreakerState.CLOSED  # 10/70 = 14% < 15%


def _closed_by_trials(d: Driver) -> None:
    for _ in range(5):
        d.clock.advance(0.1)
        d.record(fail(ROUTE, d.clock.now))
    assert d.breaker.state is BreakerState.OPEN
    for _ in range(3):
        d.clock.advance(1)
        d.record(ok(ROUTE, d.clock.now, probe=True))
    assert d.breaker.state is BreakerState.CLOSED
    assert d.breaker.reason is BreakerReason.TRIALS_PASSED


def test_one_failure_on_probation_reopens(clock: FakeClock) -> None:
    """Within probation_s of closing, the first failure re-opens (a flap costs one call)."""
    d = Driver(clock, BreakerSettings(consecutive_failures=5, probation_s=8.0))
    _closed_by_trials(d)
    clock.advance(7.9)
    d.record(fail(ROUTE, clock.now, ErrorClass.OVERLOADED))
    assert d.breaker.state is BreakerState.OPEN
    assert d.breaker.reason is BreakerReason.PROBATION_FAILED


def test_probation_ends(clock: FakeClock) -> None:
    """After probation_s a single failure is just a failure; probation_s 0 turns it off."""
    for probation, wait in ((8.0, 8.1), (0.0, 0.1)):
        d = Driver(clock, BreakerSettings(consecutive_failures=5, probation_s=probation))
        _closed_by_trials(d)
        clock.advance(wait)
        d.record(fail(ROUTE, clock.now, ErrorClass.OVERLOADED))
        assert d.breaker.state is BreakerState.CLOSED, probation


def test_probation_defaults_to_the_open_duration(clock: FakeClock) -> None:
    """probation_s None: the base open_duration_s (30 s by default)."""
    assert BreakerSettings().probation() == 30.0
    assert BreakerSettings(open_duration_s=8, max_open_duration_s=30).probation() == 8.0


def test_an_operator_release_is_not_probation(clock: FakeClock) -> None:
    """A route an operator released is trusted: one failure does not re-open it."""
    d = Driver(clock, IN_A_ROW)
    d.breaker, _ = force(d.breaker, BreakerState.FORCED_OPEN, clock.now)
    d.breaker, _ = force(d.breaker, None, clock.now)
    clock.advance(1)
    d.record(fail(ROUTE, clock.now, ErrorClass.OVERLOADED))
    assert d.breaker.state is BreakerState.CLOSED


# --- laws (property tests) --------------------------------------------------------------

# Weighted towards the interesting paths: good trials (to reach CLOSED from HALF_OPEN)
# and clock steps landing just before / at / after a 30 s open_until.
_outcome = st.tuples(
    st.sampled_from([True, True, True, False]),  # ok
    st.sampled_from([None, *ErrorClass]),
    st.sampled_from([True, True, False]),  # trial
    st.booleans(),  # probe
    st.one_of(st.none(), st.floats(min_value=0.0, max_value=400.0)),  # retry after
    st.one_of(
        st.floats(min_value=0.0, max_value=900.0), st.floats(min_value=0.0, max_value=3000.0)
    ),
    st.floats(min_value=0.0, max_value=1.0),  # error rate in stats
    st.booleans(),  # enough samples
)
events = st.lists(
    st.one_of(
        st.tuples(
            st.just("advance"),
            st.one_of(st.sampled_from([0.5, 1.0, 29.5, 30.0, 59.9, 60.0]), st.floats(0.0, 120.0)),
        ),
        st.tuples(st.just("admit"), st.none()),
        st.tuples(st.just("release"), st.none()),
        st.tuples(st.just("outcome"), _outcome),
        st.tuples(st.just("outcome"), _outcome),
        st.tuples(st.just("force"), st.sampled_from([None, *ALL_STATES])),
    ),
    max_size=80,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events, st.sampled_from([BreakerSettings(), BreakerSettings(trial_latency_ms=1000)]))
def test_breaker_laws(evs: list, settings: BreakerSettings) -> None:
    """Random event sequences respect the breaker's invariants.

    Never leaves OPEN before open_until; only closes (from HALF_OPEN) after N consecutive
    good trials; forced states hold; version grows by one per change; counters stay sane.
    """
    clock = FakeClock()
    b = Breaker(route=ROUTE)
    good_streak = 0  # consecutive good trials seen since the breaker last entered HALF_OPEN
    for kind, arg in evs:
        before = b
        t = None
        if kind == "advance":
            clock.advance(arg)
            continue
        if kind == "admit":
            b, adm, t = admit(b, settings, clock.now)
            if before.state is BreakerState.FORCED_OPEN:
                assert not adm.permitted
            if before.state in (BreakerState.CLOSED, BreakerState.FORCED_CLOSED):
                assert adm.permitted and not adm.trial
            if before.state is BreakerState.OPEN and clock.now < before.open_until:
                assert not adm.permitted and b == before
            assert b.trials_in_flight(clock.now) <= settings.half_open_max_trials
        elif kind == "release":
            b = release_trial(b, clock.now)
        elif kind == "force":
            try:
                b, t = force(b, arg, clock.now)
            except IllegalTransition:
                continue
        else:
            good, ec, trial, probe, ra, latency, rate, enough = arg
            outcome = CallOutcome(
                route=ROUTE,
                at=clock.now,
                ok=good,
                error_class=None if good else ec,
                trial=trial,
                probe=probe,
                retry_after_s=ra,
                latency_ms=latency,
            )
            b, t = on_outcome(b, outcome, stats(error_rate=rate, enough_samples=enough),
                              settings, clock.now)  # fmt: skip
            fast = settings.trial_latency_ms is None or latency <= settings.trial_latency_ms
            if before.state is BreakerState.HALF_OPEN and (trial or probe):
                good_streak = good_streak + 1 if good and fast else 0
        # Never leaves OPEN before open_until, except by an operator's force or a good
        # probe, which moves it to HALF_OPEN (never straight to CLOSED: N > 1 here).
        recovered = (
            kind == "outcome"
            and before.state is BreakerState.OPEN
            and t is not None
            and t.reason in (BreakerReason.PROBE_SUCCEEDED, BreakerReason.TRIALS_PASSED)
        )
        if before.state is BreakerState.OPEN and b.state is not BreakerState.OPEN:
            forced = kind == "force"
            assert forced or clock.now >= before.open_until or recovered
            if recovered:
                assert probe and good and fast
                closes_at_once = settings.close_after_consecutive_successes <= 1
                assert b.state is (
                    BreakerState.CLOSED if closes_at_once else BreakerState.HALF_OPEN
                )
        # Closes from HALF_OPEN only after N consecutive good trials.
        if before.state is BreakerState.HALF_OPEN and b.state is BreakerState.CLOSED:
            assert kind == "force" or good_streak >= settings.close_after_consecutive_successes
        if b.state is not BreakerState.HALF_OPEN or before.state is not BreakerState.HALF_OPEN:
            good_streak = 0
        if recovered and b.state is BreakerState.HALF_OPEN:
            good_streak = 1  # the recovering probe is the first good trial
        # Forced states hold until the operator moves them.
        if before.state in (BreakerState.FORCED_OPEN, BreakerState.FORCED_CLOSED):
            assert kind == "force" or b.state is before.state
        # Any change bumps the version (stores compare-and-set on it).
        assert (b != before) == (b.version > before.version)
        if b.state is BreakerState.OPEN:
            assert b.open_until is not None and b.trips >= 1
        if t is not None:
            assert (t.from_state, t.to_state) in TRANSITIONS
            assert t.reason in TRANSITIONS[(t.from_state, t.to_state)]


@pytest.mark.parametrize("src", ALL_STATES)
@pytest.mark.parametrize("dst", ALL_STATES)
def test_transition_table_rejects_illegal_moves(src: BreakerState, dst: BreakerState) -> None:
    """Every (from, to, reason) not in the table raises IllegalTransition."""
    b = Breaker(route=ROUTE, state=src, open_until=10.0 if src is BreakerState.OPEN else None)
    for reason in ALL_REASONS:
        allowed = reason in TRANSITIONS.get((src, dst), frozenset())
        if allowed:
            new, t = transition(b, dst, reason, 5.0, open_until=50.0)
            assert new.state is dst and new.version == 1 and t.reason is reason
        else:
            with pytest.raises(IllegalTransition):
                transition(b, dst, reason, 5.0, open_until=50.0)


def test_open_never_closes_directly() -> None:
    """OPEN -> CLOSED is illegal: a lapsed cool-down only leads to HALF_OPEN."""
    b = Breaker(route=ROUTE, state=BreakerState.OPEN, open_until=1.0)
    with pytest.raises(IllegalTransition, match="open -> closed"):
        transition(b, BreakerState.CLOSED, BreakerReason.TRIALS_PASSED, 2.0)


def test_force_and_release(clock: FakeClock) -> None:
    """Forced states ignore outcomes; release returns to CLOSED; double force raises."""
    b, t = force(Breaker(route=ROUTE), BreakerState.FORCED_OPEN, clock.now)
    assert t.reason is BreakerReason.FORCED_OPEN
    b2, _, _ = admit(b, S, clock.now)
    assert b2 == b
    for _ in range(20):
        b, t2 = on_outcome(b, ok(ROUTE, clock.now, trial=True), stats(), S, clock.now)
        assert t2 is None and b.state is BreakerState.FORCED_OPEN
    with pytest.raises(IllegalTransition):
        force(b, BreakerState.FORCED_OPEN, clock.now)
    with pytest.raises(IllegalTransition):
        force(b, BreakerState.HALF_OPEN, clock.now)
    b, t = force(b, None, clock.now)
    assert b.state is BreakerState.CLOSED and t.reason is BreakerReason.RELEASED
    with pytest.raises(IllegalTransition):
        force(b, None, clock.now)
    fc, _ = force(b, BreakerState.FORCED_CLOSED, clock.now)
    for _ in range(20):
        fc, _ = on_outcome(
            fc, fail(ROUTE, clock.now, ErrorClass.AUTH), stats(error_rate=1.0), S, clock.now
        )
    assert fc.state is BreakerState.FORCED_CLOSED


def _saturated(*, trial: bool = False) -> CallOutcome:
    """A call that found every one of our own connection slots busy."""
    cls = CLASSIFICATION[ErrorClass.LOCAL_SATURATION]
    return CallOutcome(
        route="r",
        at=100.0,
        ok=False,
        error_class=ErrorClass.LOCAL_SATURATION,
        latency_ms=5000.0,
        counts_against_route=cls.counts_against_route,
        trial=trial,
    )


def test_local_saturation_never_counts_toward_a_closed_breakers_rows() -> None:
    """One failure and one timeout short of both in-a-row rules, a local_saturation
    outcome leaves the breaker closed with its counts unchanged."""
    s = BreakerSettings(consecutive_failures=2, consecutive_timeouts=2)
    b = Breaker(route="r", consecutive_failures=1, consecutive_timeouts=1)
    after, moved = on_outcome(b, _saturated(), WindowStats(), s, now=100.0)
    assert moved is None and after.state is BreakerState.CLOSED
    assert (after.consecutive_failures, after.consecutive_timeouts) == (1, 1)


def test_a_saturated_trial_neither_closes_nor_reopens_a_half_open_breaker() -> None:
    """A half-open trial that never left the worker frees its slot and decides nothing."""
    s = BreakerSettings(close_after_consecutive_successes=1)
    lease = TrialLease(id="a", expires_at=200.0)
    b = Breaker(route="r", state=BreakerState.HALF_OPEN, since=90.0, trial_leases=(lease,))
    after, moved = on_outcome(b, _saturated(trial=True), WindowStats(), s, now=100.0)
    assert moved is None and after.state is BreakerState.HALF_OPEN
    assert after.trials_in_flight(100.0) == 0
