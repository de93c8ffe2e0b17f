"""Half-open trial leases in both health stores (memory and Redis), on an injected clock:
a slot whose holder never reports lapses, a refusal says the slots are full, probes are
admitted apart, and an outcome frees exactly its own lease."""

from __future__ import annotations

from agent_failover.resilience.breaker import BreakerReason
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState, CallOutcome
from agent_failover.stores.health import HealthStore
from tests.stores.test_health_contract import ROUTE, SETTINGS, trip

HOLD_S = 4.0  # the attempt's timeout


async def half_open_full(store: HealthStore) -> float:
    """Trip the breaker, let it go half-open and take every trial slot; return when."""
    later = await trip(store) + SETTINGS.open_duration_s
    for _ in range(SETTINGS.half_open_max_trials):
        assert (await store.admit(ROUTE, SETTINGS, later, hold_s=HOLD_S)).trial
    return later


async def test_slots_of_trials_that_never_report_lapse(health_store: HealthStore) -> None:
    """Every slot taken by calls that never report (a killed worker): refused as
    trial_slots_full until the first lease lapses at timeout + grace, then admitted."""
    later = await half_open_full(health_store)
    lapse = later + HOLD_S + SETTINGS.trial_lease_grace_s
    refused = await health_store.admit(ROUTE, SETTINGS, lapse - 0.01, hold_s=HOLD_S)
    assert not refused.permitted and refused.reason is BreakerReason.TRIAL_SLOTS_FULL
    assert refused.retry_at is not None and abs(refused.retry_at - lapse) < 1e-6
    again = await health_store.admit(ROUTE, SETTINGS, lapse, hold_s=HOLD_S)
    assert again.permitted and again.trial and again.lease
    b = await health_store.breaker(ROUTE)
    assert b.state is BreakerState.HALF_OPEN and b.trials_in_flight(lapse) == 1


async def test_probes_are_admitted_with_every_slot_held(health_store: HealthStore) -> None:
    """The monitor's probes need no trial slot: with all held, good probes close it."""
    later = await half_open_full(health_store)
    for i in range(SETTINGS.close_after_consecutive_successes):
        now = later + 0.5 + i * 0.1
        adm = await health_store.admit(ROUTE, SETTINGS, now, probe=True)
        assert adm.permitted and adm.trial and adm.lease is None
        probe = CallOutcome(route=ROUTE, at=now, ok=True, latency_ms=50.0, probe=True)
        await health_store.record(probe, SETTINGS)
    assert (await health_store.breaker(ROUTE)).state is BreakerState.CLOSED


async def test_an_outcome_frees_its_own_lease(health_store: HealthStore) -> None:
    """A reported trial and a released one each give back the lease they held."""
    settings = BreakerSettings(
        consecutive_failures=None, consecutive_timeouts=None, half_open_max_trials=2
    )
    later = await trip(health_store) + settings.open_duration_s
    first = await health_store.admit(ROUTE, settings, later, hold_s=30.0)
    second = await health_store.admit(ROUTE, settings, later + 1, hold_s=HOLD_S)
    assert first.lease and second.lease and first.lease != second.lease
    good = CallOutcome(
        route=ROUTE, at=later + 2, ok=True, latency_ms=50.0, trial=True, trial_lease=second.lease
    )
    await health_store.record(good, settings)
    b = await health_store.breaker(ROUTE)
    assert [lease.id for lease in b.trial_leases] == [first.lease]
    await health_store.release_trial(ROUTE, later + 3, first.lease)
    assert (await health_store.breaker(ROUTE)).trial_leases == ()


async def test_an_hour_later_no_slot_is_held_by_calls_that_never_reported(
    health_store: HealthStore,
) -> None:
    """Slots taken with the default hold and never given back are free an hour later
    (before leases they stayed taken for good: every later call and probe refused)."""
    later = await trip(health_store) + SETTINGS.open_duration_s
    for _ in range(SETTINGS.half_open_max_trials):
        assert (await health_store.admit(ROUTE, SETTINGS, later)).trial
    assert (await health_store.admit(ROUTE, SETTINGS, later + 3600)).permitted
