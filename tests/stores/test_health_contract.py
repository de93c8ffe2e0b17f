"""The health store contract, run against the in-memory store and against real Redis.

Anything a planner or the health monitor relies on is asserted here once, so both
implementations behave identically: breaker transitions driven by recorded outcomes,
atomic half-open trial slots, forcing, snapshots, SLA demotion flags and shadow-evaluation
quality samples and verdicts.
"""

from __future__ import annotations

import math

import pytest

from agent_failover.resilience.breaker import BreakerReason, IllegalTransition
from agent_failover.resilience.config import MAX_QUALITY_SAMPLES, MAX_SLA_STREAK, BreakerSettings
from agent_failover.resilience.contracts import BreakerState, CallOutcome
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.shadow import QualitySample
from agent_failover.stores.health import HealthStore

T0 = 1_700_000_000.0
ROUTE = "anthropic-us-east"
# The rate rules alone; the in-a-row rules (consecutive_*) have their own test.
SETTINGS = BreakerSettings(consecutive_failures=None, consecutive_timeouts=None)


def ok(at: float, latency_ms: float = 100.0, **kw: object) -> CallOutcome:
    """A successful call on ROUTE (or ``route=``) finishing at ``at``."""
    return CallOutcome(route=kw.pop("route", ROUTE), at=at, ok=True, latency_ms=latency_ms, **kw)


def err(at: float, ec: ErrorClass = ErrorClass.SERVER_ERROR, **kw: object) -> CallOutcome:
    """A failed call of class ``ec`` on ROUTE (or ``route=``) finishing at ``at``."""
    return CallOutcome(
        route=kw.pop("route", ROUTE), at=at, ok=False, error_class=ec, latency_ms=50.0, **kw
    )


async def trip(store: HealthStore, at: float = T0) -> float:
    """Record errors until the breaker opens; return the time of the tripping outcome."""
    for i in range(SETTINGS.min_calls):
        t = at + i * 0.1
        transition = await store.record(err(t), SETTINGS)
        if transition is not None:
            return t
    raise AssertionError("breaker never tripped")


async def test_unseen_route_is_closed(health_store: HealthStore) -> None:
    """A route with no history has a fresh CLOSED breaker and empty stats."""
    b = await health_store.breaker("never-seen")
    assert (b.state, b.version, b.trips) == (BreakerState.CLOSED, 0, 0)
    snap = await health_store.snapshot(["never-seen"], now=T0, window_s=30, min_calls=10)
    rh = snap.get("never-seen")
    assert rh.breaker is BreakerState.CLOSED and rh.stats.calls == 0 and not snap.store_degraded


async def test_errors_below_min_calls_do_not_trip(health_store: HealthStore) -> None:
    """Fewer than min_calls outcomes never trip on the error rate, however bad they are."""
    for i in range(SETTINGS.min_calls - 1):
        assert await health_store.record(err(T0 + i), SETTINGS) is None
    assert (await health_store.breaker(ROUTE)).state is BreakerState.CLOSED


async def test_failures_in_a_row_trip_and_a_success_resets_them(health_store: HealthStore) -> None:
    """The in-a-row count persists between records: 4 failures, a success, 4 failures stay
    closed (4/69 = 6 %); a 5th in a row opens on CONSECUTIVE_FAILURES."""
    settings = BreakerSettings(consecutive_failures=5)
    t = T0
    for good in [True] * 60 + [False] * 4 + [True] + [False] * 4:
        t += 0.25
        assert await health_store.record(ok(t) if good else err(t), settings) is None
    assert (await health_store.breaker(ROUTE)).consecutive_failures == 4
    moved = await health_store.record(err(t + 0.25, ErrorClass.OVERLOADED), settings)
    assert moved is not None and moved.reason is BreakerReason.CONSECUTIVE_FAILURES
    assert (await health_store.breaker(ROUTE)).state is BreakerState.OPEN


async def test_local_saturation_counts_for_operators_not_against_the_route(
    health_store: HealthStore,
) -> None:
    """Ten calls that found our own connection slots busy, with both in-a-row rules at 2:
    the breaker stays closed with nothing counted, the rates see no call, and the snapshot
    shows the ten saturations."""
    settings = BreakerSettings(consecutive_failures=2, consecutive_timeouts=2)
    for i in range(10):
        saturated = err(T0 + i * 0.1, ErrorClass.LOCAL_SATURATION, counts_against_route=False)
        assert await health_store.record(saturated, settings) is None
    b = await health_store.breaker(ROUTE)
    assert b.state is BreakerState.CLOSED
    assert b.consecutive_failures == b.consecutive_timeouts == 0
    stats = (
        (await health_store.snapshot([ROUTE], now=T0 + 2, window_s=60, min_calls=1))
        .get(ROUTE)
        .stats
    )
    assert (stats.calls, stats.errors, stats.local_saturations) == (0, 0, 10)


async def test_error_rate_trips_once(health_store: HealthStore) -> None:
    """Crossing the error-rate threshold opens the breaker once, with the right cool-down."""
    transitions = []
    for i in range(20):
        t = await health_store.record(err(T0 + i * 0.1), SETTINGS)
        if t is not None:
            transitions.append(t)
    assert len(transitions) == 1
    t = transitions[0]
    assert (t.from_state, t.to_state, t.reason) == (
        BreakerState.CLOSED,
        BreakerState.OPEN,
        BreakerReason.ERROR_RATE,
    )
    b = await health_store.breaker(ROUTE)
    assert b.state is BreakerState.OPEN and b.trips == 1
    assert b.open_until == pytest.approx(t.at + SETTINGS.open_duration_s)


async def test_auth_error_trips_immediately(health_store: HealthStore) -> None:
    """A single auth failure opens the breaker without waiting for min_calls."""
    transition = await health_store.record(err(T0, ErrorClass.AUTH), SETTINGS)
    assert transition is not None and transition.reason is BreakerReason.AUTH_FAILURE


async def test_outcomes_outside_window_are_forgotten(health_store: HealthStore) -> None:
    """Errors older than the error window do not count towards a later trip."""
    for i in range(SETTINGS.min_calls - 1):
        await health_store.record(err(T0 + i * 0.1), SETTINGS)
    later = T0 + SETTINGS.semantic_window_s + 1
    # Were the old errors still counted, the first success would make 9/10 errors and trip.
    for i in range(SETTINGS.min_calls):
        assert await health_store.record(ok(later + i * 0.1), SETTINGS) is None
    assert (await health_store.breaker(ROUTE)).state is BreakerState.CLOSED


async def test_open_rejects_until_cool_down(health_store: HealthStore) -> None:
    """An open breaker rejects with retry_at = open_until and names the route."""
    at = await trip(health_store)
    open_until = at + SETTINGS.open_duration_s
    adm = await health_store.admit(ROUTE, SETTINGS, at + 1)
    assert not adm.permitted and adm.route == ROUTE
    assert adm.retry_at == pytest.approx(open_until)
    assert not (await health_store.admit(ROUTE, SETTINGS, open_until - 0.5)).permitted
    assert (await health_store.breaker(ROUTE)).state is BreakerState.OPEN
    assert (await health_store.admit(ROUTE, SETTINGS, open_until)).trial


async def test_half_open_trial_budget(health_store: HealthStore) -> None:
    """After the cool-down, exactly half_open_max_trials concurrent trials are admitted."""
    at = await trip(health_store)
    later = at + SETTINGS.open_duration_s
    admissions = [await health_store.admit(ROUTE, SETTINGS, later) for _ in range(5)]
    assert [a.permitted for a in admissions] == [True, True, True, False, False]
    assert all(a.trial for a in admissions[:3])
    b = await health_store.breaker(ROUTE)
    assert b.state is BreakerState.HALF_OPEN and b.trials_in_flight(later) == 3


async def test_release_trial_frees_a_slot(health_store: HealthStore) -> None:
    """A released (cancelled) trial gives its slot to the next caller."""
    at = await trip(health_store)
    later = at + SETTINGS.open_duration_s
    for _ in range(SETTINGS.half_open_max_trials):
        assert (await health_store.admit(ROUTE, SETTINGS, later)).permitted
    assert not (await health_store.admit(ROUTE, SETTINGS, later)).permitted
    await health_store.release_trial(ROUTE, later)
    assert (await health_store.admit(ROUTE, SETTINGS, later)).permitted


async def test_good_trials_close(health_store: HealthStore) -> None:
    """N consecutive good trials close a half-open breaker (and only then)."""
    at = await trip(health_store)
    later = at + SETTINGS.open_duration_s
    transitions = []
    for i in range(SETTINGS.close_after_consecutive_successes):
        assert (await health_store.admit(ROUTE, SETTINGS, later + i)).trial
        transitions.append(await health_store.record(ok(later + i, trial=True), SETTINGS))
    assert transitions[:-1] == [None] * (len(transitions) - 1)
    assert transitions[-1] is not None and transitions[-1].reason is BreakerReason.TRIALS_PASSED
    b = await health_store.breaker(ROUTE)
    assert b.state is BreakerState.CLOSED and b.trips == 0


async def test_bad_trial_reopens_longer(health_store: HealthStore) -> None:
    """A failed trial reopens the breaker for open_duration x multiplier."""
    at = await trip(health_store)
    later = at + SETTINGS.open_duration_s
    assert (await health_store.admit(ROUTE, SETTINGS, later)).trial
    transition = await health_store.record(err(later + 1, trial=True), SETTINGS)
    assert transition is not None and transition.reason is BreakerReason.TRIAL_FAILED
    expected = later + 1 + SETTINGS.open_duration_s * SETTINGS.open_duration_multiplier
    assert transition.open_until == pytest.approx(expected)
    assert (await health_store.breaker(ROUTE)).trips == 2


async def test_open_never_closes_by_itself(health_store: HealthStore) -> None:
    """Successes recorded while OPEN (late non-trial calls) do not close the breaker."""
    at = await trip(health_store)
    for i in range(20):
        assert await health_store.record(ok(at + 1 + i), SETTINGS) is None
    assert (await health_store.breaker(ROUTE)).state is BreakerState.OPEN


async def test_force_and_release(health_store: HealthStore) -> None:
    """Forced open rejects every call; release returns to CLOSED; illegal moves raise."""
    t = await health_store.force(ROUTE, BreakerState.FORCED_OPEN, T0)
    assert t.to_state is BreakerState.FORCED_OPEN
    adm = await health_store.admit(ROUTE, SETTINGS, T0 + 1)
    assert not adm.permitted and adm.reason is BreakerReason.FORCED_OPEN
    with pytest.raises(IllegalTransition):
        await health_store.force(ROUTE, BreakerState.FORCED_OPEN, T0 + 2)
    released = await health_store.force(ROUTE, None, T0 + 3)
    assert released.to_state is BreakerState.CLOSED
    assert (await health_store.admit(ROUTE, SETTINGS, T0 + 4)).permitted


async def test_slow_calls_trip_against_baseline(health_store: HealthStore) -> None:
    """With no absolute slow-call threshold, calls 10x the route's baseline p95 trip it
    (the p95 rule is off here: it would trip first)."""
    settings = BreakerSettings(slow_call_ms=None, p95_baseline_factor=None)
    for i in range(20):
        assert await health_store.record(ok(T0 + i, 100.0), settings) is None
    transition = None
    start = T0 + 20 + settings.error_window_s  # after the baseline refresh interval
    for i in range(40):
        transition = await health_store.record(ok(start + i, 1000.0), settings)
        if transition is not None:
            break
    assert transition is not None and transition.reason is BreakerReason.SLOW_CALLS


async def test_snapshot_stats_and_probe(health_store: HealthStore) -> None:
    """A snapshot carries window percentiles, breaker state and the last probe result."""
    for i, latency in enumerate([100.0, 200.0, 300.0, 400.0]):
        await health_store.record(ok(T0 + i, latency), SETTINGS)
    await health_store.record(ok(T0 - 100, 9999.0), SETTINGS)  # outside the window
    await health_store.record(err(T0 + 5, probe=True), SETTINGS)
    snap = await health_store.snapshot([ROUTE], now=T0 + 6, window_s=30, min_calls=3)
    rh = snap.get(ROUTE)
    assert rh.stats.calls == 5 and rh.stats.errors == 1 and rh.stats.enough_samples
    # Percentiles come from 2 % log bins and report the bin's upper edge.
    assert 200.0 <= rh.stats.p50_ms <= 204.0 and 400.0 <= rh.stats.p99_ms <= 408.0
    assert rh.stats.probes == 1
    assert (rh.last_probe_at, rh.last_probe_ok) == (T0 + 5, False)
    assert rh.breaker is BreakerState.CLOSED and snap.taken_at == T0 + 6


async def test_snapshot_reports_open_breaker(health_store: HealthStore) -> None:
    """A snapshot shows an open breaker with its open_until and reason."""
    at = await trip(health_store)
    snap = await health_store.snapshot([ROUTE, "other"], now=at + 1, window_s=30, min_calls=10)
    rh = snap.get(ROUTE)
    assert rh.breaker is BreakerState.OPEN and rh.breaker_reason == BreakerReason.ERROR_RATE.value
    assert rh.open_until == pytest.approx(at + SETTINGS.open_duration_s)
    assert snap.get("other").breaker is BreakerState.CLOSED


async def test_sla_demotion_is_per_role(health_store: HealthStore) -> None:
    """An SLA demotion applies to the role that set it, and can be cleared."""
    await health_store.set_sla_demoted("reasoning", ROUTE, True)
    snap = await health_store.snapshot([ROUTE], now=T0, window_s=30, min_calls=1, role="reasoning")
    assert snap.get(ROUTE).sla_demoted
    other = await health_store.snapshot([ROUTE], now=T0, window_s=30, min_calls=1, role="critic")
    assert not other.get(ROUTE).sla_demoted
    no_role = await health_store.snapshot([ROUTE], now=T0, window_s=30, min_calls=1)
    assert not no_role.get(ROUTE).sla_demoted
    await health_store.set_sla_demoted("reasoning", ROUTE, False)
    snap = await health_store.snapshot([ROUTE], now=T0, window_s=30, min_calls=1, role="reasoning")
    assert not snap.get(ROUTE).sla_demoted


async def test_role_latency_is_kept_per_role_on_a_shared_route(health_store: HealthStore) -> None:
    """900 ms planner calls beside 7.5 s synthesis calls on one route, and a 300 ms probe:
    each role's stats hold its own calls plus the probe; the route's hold everything."""
    for i in range(20):
        await health_store.record(ok(T0 + i, 900.0, role="planner"), SETTINGS)
        await health_store.record(ok(T0 + i + 0.5, 7500.0, role="synthesis"), SETTINGS)
    await health_store.record(ok(T0 + 21, 300.0, probe=True), SETTINGS)
    now = T0 + 22
    snaps = {
        r: (await health_store.snapshot([ROUTE], now=now, window_s=60, min_calls=10, role=r))
        for r in ("planner", "synthesis")
    }
    planner, synthesis = snaps["planner"].get(ROUTE), snaps["synthesis"].get(ROUTE)
    assert planner.stats.p95_ms is not None and planner.stats.p95_ms >= 7500
    assert planner.role_stats is not None and synthesis.role_stats is not None
    assert planner.role_stats.latency_samples == synthesis.role_stats.latency_samples == 21
    assert planner.role_stats.probes == 1
    assert 900 <= (planner.role_stats.p95_ms or 0) <= 900 * 1.02
    assert (synthesis.role_stats.p95_ms or 0) >= 7500
    plain = await health_store.snapshot([ROUTE], now=now, window_s=60, min_calls=10)
    assert plain.get(ROUTE).role_stats is None and plain.get(ROUTE).stats.calls == 41


async def test_recent_samples_are_per_role_on_a_shared_route(health_store: HealthStore) -> None:
    """The restore and re-demote streaks of a role read its own calls plus probes: 900 ms
    planner calls and a probe beside 7.5 s synthesis calls; the planner's recent samples
    hold no synthesis call (before: every role's), and without a role all count."""
    for i in range(6):
        await health_store.record(ok(T0 + i, 900.0, role="planner"), SETTINGS)
        await health_store.record(ok(T0 + i + 0.5, 7500.0, role="synthesis"), SETTINGS)
    await health_store.record(ok(T0 + 7, 300.0, probe=True), SETTINGS)
    now = T0 + 8

    async def recent(role: str | None) -> list[float]:
        snap = await health_store.snapshot([ROUTE], now=now, window_s=60, min_calls=1, role=role)
        return [s.latency_ms for s in snap.get(ROUTE).recent]

    assert await recent("planner") == [900.0] * 6 + [300.0]
    assert await recent("synthesis") == [7500.0] * 6 + [300.0]
    assert len(await recent(None)) == 13


async def test_routes_are_independent(health_store: HealthStore) -> None:
    """Tripping one route leaves every other route closed."""
    await trip(health_store)
    await health_store.record(ok(T0, route="openai-us"), SETTINGS)
    assert (await health_store.breaker("openai-us")).state is BreakerState.CLOSED


async def test_status_healthy(health_store: HealthStore) -> None:
    """A store with a reachable backend reports healthy with nothing pending."""
    status = await health_store.status()
    assert status.healthy and status.pending_sync == 0 and status.degraded_since is None


# --- 429 cool-downs, traffic stamps, learned windows, SLA since, recent samples ---------------


def rate_limited(at: float, retry_after_s: float, **kw: object) -> CallOutcome:
    """A 429 as call_model / probe_endpoint record it (a cool-down, not a route failure)."""
    return err(
        at,
        ErrorClass.RATE_LIMITED,
        retry_after_s=retry_after_s,
        counts_against_route=False,
        **kw,
    )


async def test_rate_limit_cools_down_without_opening(health_store: HealthStore) -> None:
    """A 429 (here from a probe) sets cooldown_until = at + Retry-After; the breaker stays
    closed (before: it opened for the breaker's 30 s open duration)."""
    assert await health_store.record(rate_limited(T0, 1.5, probe=True), SETTINGS) is None
    b = await health_store.breaker(ROUTE)
    assert b.state is BreakerState.CLOSED and b.cooldown_until == pytest.approx(T0 + 1.5)
    snap = await health_store.snapshot([ROUTE], now=T0 + 1, window_s=30, min_calls=1)
    rh = snap.get(ROUTE)
    assert rh.cooldown_until == pytest.approx(T0 + 1.5) and rh.stats.calls == 0
    assert (await health_store.admit(ROUTE, SETTINGS, T0 + 1)).permitted


async def test_last_call_at_ignores_probes(health_store: HealthStore) -> None:
    """Real calls stamp last_call_at (what the monitor's probe decision reads); probes do not."""
    await health_store.record(ok(T0), SETTINGS)
    await health_store.record(ok(T0 + 5, probe=True), SETTINGS)
    await health_store.record(ok(T0 - 10), SETTINGS)  # late report of an older call
    rh = (await health_store.snapshot([ROUTE], now=T0 + 6, window_s=30, min_calls=1)).get(ROUTE)
    assert rh.last_call_at == T0 and rh.last_probe_at == T0 + 5


async def test_learned_context_window(health_store: HealthStore) -> None:
    """A window stated by the provider is kept per route and reported by snapshots."""
    await health_store.learn_context_window(ROUTE, 128_000, T0)
    await health_store.learn_context_window(ROUTE, 131_072, T0 + 1)  # the latest statement wins
    snap = await health_store.snapshot([ROUTE, "other"], now=T0 + 2, window_s=30, min_calls=1)
    assert snap.get(ROUTE).context_window == 131_072
    assert snap.get("other").context_window is None


async def test_sla_verdict_remembers_when_it_changed(health_store: HealthStore) -> None:
    """set_sla_demoted(at=) is reported as sla_since, per role."""
    await health_store.set_sla_demoted("critic", ROUTE, True, at=T0)
    await health_store.set_sla_demoted("critic", ROUTE, False, at=T0 + 40)
    rh = (
        await health_store.snapshot([ROUTE], now=T0 + 41, window_s=30, min_calls=1, role="critic")
    ).get(ROUTE)
    assert not rh.sla_demoted and rh.sla_since == T0 + 40
    other = await health_store.snapshot([ROUTE], now=T0 + 41, window_s=30, min_calls=1, role="x")
    assert other.get(ROUTE).sla_since is None


async def test_recent_samples_are_the_newest_counted_ones(health_store: HealthStore) -> None:
    """recent: the newest observations counted against the route (probes included, 429s
    and caller faults not), oldest first, capped, even beyond the snapshot's window."""
    for i in range(MAX_SLA_STREAK + 4):
        await health_store.record(ok(T0 + i, 100.0 + i, probe=i % 2 == 0), SETTINGS)
    await health_store.record(rate_limited(T0 + 100, 1.0), SETTINGS)
    snap = await health_store.snapshot([ROUTE], now=T0 + 200, window_s=10, min_calls=1)
    recent = snap.get(ROUTE).recent
    assert len(recent) == MAX_SLA_STREAK
    assert [s.at for s in recent] == [T0 + i for i in range(4, MAX_SLA_STREAK + 4)]
    assert snap.get(ROUTE).stats.calls == 0  # the window itself is empty at T0 + 200


# --- the long-horizon latency baseline -----------------------------------------------------

HOUR = 472_222 * 3600.0  # an hour boundary


async def feed(store: HealthStore, latency_at, start: int, seconds: int, every: int = 4):
    """A call every ``every`` s from HOUR + start; returns the first latency trip's time."""
    for i in range(start, start + seconds, every):
        t = await store.record(ok(HOUR + i, latency_at(i)), SETTINGS)
        if t is not None:
            assert t.reason in (BreakerReason.SLOW_CALLS, BreakerReason.P95_ABOVE_BASELINE)
            return i
    return None


async def test_long_horizon_baseline_is_kept_in_hourly_buckets(health_store: HealthStore) -> None:
    """Two completed hours at ~200 ms give a long baseline of ~200 ms, whatever the current
    hour does; with no completed hour it is None and the short one is used."""
    assert await feed(health_store, lambda i: 200.0, 0, 7200, every=20) is None
    b = await health_store.latency_baseline(ROUTE, now=HOUR + 7200 + 60, min_samples=10)
    assert b.source.value == "long" and 200.0 <= (b.long_p95_ms or 0) <= 220.0
    assert b.long_samples == 360 and b.used_ms == b.long_p95_ms
    fresh = await health_store.latency_baseline("new", now=HOUR, min_samples=10)
    assert fresh.source.value == "none" and fresh.used_ms is None


def ramp(i: int) -> float:
    """200 ms for two hours, then a linear climb to 30x over 20 minutes."""
    return 200.0 if i < 7200 else 200.0 * (1 + 29 * min(1.0, (i - 7200) / 1200))


async def test_gradual_slowdown_trips_through_the_store(health_store: HealthStore) -> None:
    """The 30x ramp trips a latency rule within minutes (before: the 10-minute
    baseline followed the ramp and it never tripped)."""
    assert await feed(health_store, ramp, 0, 7200, every=20) is None
    tripped = await feed(health_store, ramp, 7200, 1800, every=2)
    assert tripped is not None and tripped - 7200 < 600, tripped


async def test_one_call_in_five_at_ten_x_trips_through_the_store(
    health_store: HealthStore,
) -> None:
    """Two hours at 200 ms, then a call a second with every fifth at 2 s: the window p95
    is 10x the 7-day baseline and the breaker opens within the error window (before: only
    20 % of calls were slow, under the 50 % slow-call rate, and it stayed closed)."""
    assert await feed(health_store, lambda i: 200.0, 0, 7200, every=20) is None
    tripped = await feed(health_store, lambda i: 2000.0 if i % 5 == 0 else 200.0, 7200, 600, 1)
    assert tripped is not None and tripped - 7200 <= SETTINGS.error_window_s, tripped
    breaker = await health_store.breaker(ROUTE)
    assert breaker.reason is BreakerReason.P95_ABOVE_BASELINE


async def test_half_invalid_outputs_at_fifteen_calls_a_minute_open_through_the_store(
    health_store: HealthStore,
) -> None:
    """A call every 4 s, every other one semantically invalid: the semantic window (60 s)
    holds min_calls calls, so the breaker opens within a minute and a half (before: the
    minimum was counted in the 30 s error window, which never holds 10 such calls)."""
    opened_at = None
    for i in range(45):
        at = T0 + 4 * i
        if i % 2:
            outcome = err(at, ErrorClass.INVALID_OUTPUT, semantic_failure=True)
        else:
            outcome = ok(at)
        transition = await health_store.record(outcome, SETTINGS)
        if transition is not None:
            assert transition.reason is BreakerReason.SEMANTIC_FAILURES
            opened_at = 4 * i
            break
    assert opened_at is not None and opened_at <= 90, opened_at


async def test_always_slow_route_does_not_trip_through_the_store(
    health_store: HealthStore,
) -> None:
    """A route that always took 6 s is not slow at 6 s."""
    assert await feed(health_store, lambda i: 6000.0, 0, 7200, every=20) is None
    assert await feed(health_store, lambda i: 6000.0, 7200, 1800, every=2) is None


# --- running aggregates: cost and precision do not depend on traffic ------------------------


async def test_percentiles_are_exact_enough(health_store: HealthStore) -> None:
    """Window percentiles are within 2 % above the exact nearest-rank value, never below."""
    latencies = [37.0 + (i * 7919) % 4000 for i in range(500)]
    for i, latency in enumerate(latencies):
        await health_store.record(ok(T0 + i * 0.05, latency, ttft_ms=latency / 4), SETTINGS)
    now = T0 + 25
    stats = (
        (await health_store.snapshot([ROUTE], now=now, window_s=30, min_calls=1)).get(ROUTE).stats
    )
    ordered = sorted(latencies)
    for q, got in ((50, stats.p50_ms), (95, stats.p95_ms), (99, stats.p99_ms)):
        exact = ordered[math.ceil(q / 100 * len(ordered)) - 1]
        assert got is not None and exact <= got <= exact * 1.02, (q, exact, got)
    assert stats.calls == stats.latency_samples == 500
    exact_ttft = sorted(x / 4 for x in latencies)[math.ceil(0.95 * 500) - 1]
    assert exact_ttft <= (stats.ttft_p95_ms or 0) <= exact_ttft * 1.02


async def test_window_sums_many_calls_per_second(health_store: HealthStore) -> None:
    """Hundreds of outcomes in one second are all counted (a bucket holds sums, not a list)."""
    for i in range(300):
        outcome = err(T0 + i / 1000) if i % 10 == 0 else ok(T0 + i / 1000, 100.0 + i)
        await health_store.record(outcome, BreakerSettings(error_rate_threshold=0.5))
    snap = await health_store.snapshot([ROUTE], now=T0 + 1, window_s=30, min_calls=1)
    stats = snap.get(ROUTE).stats
    assert (stats.calls, stats.errors) == (300, 30)
    assert stats.error_rate == pytest.approx(0.1)


async def test_slow_calls_counted_from_histogram(health_store: HealthStore) -> None:
    """With an absolute threshold, calls clearly above it are slow, calls at it are not."""
    settings = BreakerSettings(slow_call_ms=1000.0, min_calls=10)
    transition = None
    for i in range(10):
        transition = await health_store.record(ok(T0 + i, 1000.0), settings)
    assert transition is None  # exactly at the threshold is not slow
    for i in range(10, 30):
        transition = await health_store.record(ok(T0 + i * 0.5, 1100.0), settings)
        if transition is not None:
            break
    assert transition is not None and transition.reason is BreakerReason.SLOW_CALLS


async def test_closed_breaker_starts_from_a_clean_window(health_store: HealthStore) -> None:
    """After good trials close a breaker, the outage's errors still inside the error window
    do not count: the next outcomes cannot re-trip it on old evidence (no flapping)."""
    at = await trip(health_store)
    later = at + 5.0  # well inside the 30 s error window
    await health_store.force(ROUTE, BreakerState.FORCED_OPEN, later)
    await health_store.force(ROUTE, None, later)  # released: CLOSED since `later`
    for i in range(3):
        assert await health_store.record(ok(later + 1 + i), SETTINGS) is None
    assert (await health_store.breaker(ROUTE)).state is BreakerState.CLOSED
    for i in range(SETTINGS.min_calls):  # new errors after the close still trip it
        t = await health_store.record(err(later + 5 + i * 0.1), SETTINGS)
        if t is not None:
            break
    assert (await health_store.breaker(ROUTE)).state is BreakerState.OPEN


# --- shadow evaluation -------------------------------------------------------------------


async def test_quality_samples_are_per_role_oldest_first_and_capped(
    health_store: HealthStore,
) -> None:
    """record_quality keeps the newest MAX_QUALITY_SAMPLES per (role, route), oldest first."""
    n = MAX_QUALITY_SAMPLES + 5
    for i in range(n):
        await health_store.record_quality("critic", ROUTE, QualitySample(at=T0 + i, score=i % 2))
    await health_store.record_quality("planner", ROUTE, QualitySample(at=T0, score=0.25))
    state = await health_store.quality("critic", ROUTE)
    assert [s.at for s in state.samples] == [T0 + i for i in range(5, n)]
    assert [s.score for s in state.samples[:2]] == [1.0, 0.0]
    assert [s.score for s in (await health_store.quality("planner", ROUTE)).samples] == [0.25]
    assert (await health_store.quality("critic", "openai-us")).samples == []


async def test_quality_verdict_is_per_role_and_in_snapshots(health_store: HealthStore) -> None:
    """set_quality_regressed shows as quality_regressed/quality_since in the role's snapshot
    only, is read back by quality(), and can be cleared."""
    await health_store.set_quality_regressed("critic", ROUTE, True, at=T0 + 5, delta=0.5)
    snap = await health_store.snapshot([ROUTE], now=T0 + 6, window_s=30, min_calls=1, role="critic")
    rh = snap.get(ROUTE)
    assert rh.quality_regressed and rh.quality_since == T0 + 5
    other = await health_store.snapshot([ROUTE], now=T0 + 6, window_s=30, min_calls=1, role="x")
    assert not other.get(ROUTE).quality_regressed
    no_role = await health_store.snapshot([ROUTE], now=T0 + 6, window_s=30, min_calls=1)
    assert not no_role.get(ROUTE).quality_regressed
    state = await health_store.quality("critic", ROUTE)
    assert (state.regressed, state.since, state.delta) == (True, T0 + 5, 0.5)
    await health_store.set_quality_regressed("critic", ROUTE, False, at=T0 + 9)
    rh = (
        await health_store.snapshot([ROUTE], now=T0 + 10, window_s=30, min_calls=1, role="critic")
    ).get(ROUTE)
    assert not rh.quality_regressed and rh.quality_since == T0 + 9
