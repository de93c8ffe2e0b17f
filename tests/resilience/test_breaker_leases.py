"""Half-open trial slots are leases: a holder that never reports (its worker was killed)
keeps its slot only until the lease lapses, a full set of slots is refused by its own
reason, and probes are admitted apart from real calls' slots."""

from __future__ import annotations

import pytest

from agent_failover.resilience.admission import admit, admit_probe
from agent_failover.resilience.breaker import (
    Breaker,
    BreakerReason,
    TrialLease,
    on_outcome,
    release_trial,
)
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState, WindowStats
from tests.resilience.helpers import fail, ok

ROUTE = "anthropic-us-east"
S = BreakerSettings(half_open_max_trials=2, close_after_consecutive_successes=2)
T = 1_000.0  # when the breaker went half-open


def half_open() -> Breaker:
    """A breaker that has just gone half-open, no trial in flight."""
    return Breaker(
        route=ROUTE,
        state=BreakerState.HALF_OPEN,
        since=T,
        trips=1,
        reason=BreakerReason.OPEN_DURATION_ELAPSED,
    )


def fill(b: Breaker, now: float, hold_s: float) -> Breaker:
    """Admit trials until every slot is held."""
    for i in range(S.half_open_max_trials):
        b, adm, _ = admit(b, S, now, hold_s=hold_s, lease_id=f"l{i}")
        assert adm.permitted and adm.trial and adm.lease == f"l{i}"
    return b


def test_a_slot_nobody_gives_back_lapses_after_timeout_plus_grace() -> None:
    """Trials admitted and never reported hold their slots for the attempt's timeout plus
    the grace, no longer: then a new trial is admitted."""
    b = fill(half_open(), T, hold_s=10.0)
    lapse = T + 10.0 + S.trial_lease_grace_s
    b, still_full, _ = admit(b, S, lapse - 0.001, hold_s=10.0)
    assert not still_full.permitted
    b, after, _ = admit(b, S, lapse, hold_s=10.0, lease_id="new")
    assert after.permitted and after.trial and after.lease == "new"
    assert [lease.id for lease in b.trial_leases] == ["new"]  # the lapsed ones are gone


def test_full_slots_are_refused_as_trial_slots_full_until_the_first_lapse() -> None:
    """The refusal names the real reason (not the half-open move's) and when a slot frees."""
    b = fill(half_open(), T, hold_s=10.0)
    b, later, _ = admit(b, S, T + 3.0, hold_s=30.0, lease_id="x")
    assert not later.permitted and later.state is BreakerState.HALF_OPEN
    assert later.reason is BreakerReason.TRIAL_SLOTS_FULL
    assert later.retry_at == pytest.approx(T + 10.0 + S.trial_lease_grace_s)
    assert "trial_slots_full" in str(later)


def test_an_outcome_gives_back_its_own_lease() -> None:
    """A reported trial frees the lease it held, not another caller's."""
    b = fill(half_open(), T, hold_s=10.0)
    neutral = fail(ROUTE, T + 1, trial=True, trial_lease="l1", counts_against_route=False)
    b, moved = on_outcome(b, neutral, WindowStats(), S, T + 1)
    assert moved is None and [lease.id for lease in b.trial_leases] == ["l0"]
    assert release_trial(b, T + 2, "l0").trial_leases == ()


def test_a_good_trial_frees_its_slot_and_counts() -> None:
    """A good real-call trial short of closing frees its lease and counts as good."""
    b = fill(half_open(), T, hold_s=10.0)
    b, moved = on_outcome(
        b, ok(ROUTE, T + 1, trial=True, trial_lease="l0"), WindowStats(), S, T + 1
    )
    assert moved is None and b.consecutive_good == 1
    assert b.trials_in_flight(T + 1) == 1


def test_a_probe_is_admitted_with_every_trial_slot_held() -> None:
    """With every real-call slot held, the monitor's probe is still admitted (a trial
    without a lease), and good probes close the breaker."""
    b = fill(half_open(), T, hold_s=60.0)
    for i in range(S.close_after_consecutive_successes):
        now = T + 1 + i
        b, adm, _ = admit_probe(b, now)
        assert adm.permitted and adm.trial and adm.lease is None
        assert b.trials_in_flight(now) == S.half_open_max_trials  # probes take no slot
        b, moved = on_outcome(b, ok(ROUTE, now, probe=True), WindowStats(), S, now)
    assert b.state is BreakerState.CLOSED and moved is not None
    assert b.trial_leases == ()


def test_probe_admission_moves_a_due_open_breaker_and_refuses_forced_open() -> None:
    """A probe of an OPEN breaker past open_until moves it to HALF_OPEN; forced open
    refuses it."""
    opened = Breaker(route=ROUTE, state=BreakerState.OPEN, since=T, open_until=T + 5, trips=1)
    b, adm, moved = admit_probe(opened, T + 5)
    assert adm.permitted and adm.trial and b.state is BreakerState.HALF_OPEN and moved
    forced = Breaker(route=ROUTE, state=BreakerState.FORCED_OPEN, since=T)
    _, refused, _ = admit_probe(forced, T + 5)
    assert not refused.permitted and refused.reason is BreakerReason.FORCED_OPEN


def test_counted_slots_of_an_older_breaker_are_dropped_on_read() -> None:
    """A breaker stored before leases (a bare count, maybe a dead worker's) reads with no
    slot held."""
    raw = half_open().model_dump(exclude={"trial_leases"}) | {"trials_in_flight": 3}
    b = Breaker.model_validate(raw)
    assert b.trial_leases == () and b.state is BreakerState.HALF_OPEN


def test_leases_do_not_survive_a_transition() -> None:
    """Leaving half-open drops every lease; a late outcome of one frees nothing new."""
    b = fill(half_open(), T, hold_s=10.0)
    b, moved = on_outcome(
        b, fail(ROUTE, T + 1, trial=True, trial_lease="l0"), WindowStats(), S, T + 1
    )
    assert moved is not None and b.state is BreakerState.OPEN and b.trial_leases == ()
    again = b.model_copy(
        update={
            "state": BreakerState.HALF_OPEN,
            "trial_leases": (TrialLease(id="fresh", expires_at=T + 100),),
        }
    )
    late = fail(ROUTE, T + 2, trial=True, trial_lease="l1", counts_against_route=False)
    after, _ = on_outcome(again, late, WindowStats(), S, T + 2)
    assert [lease.id for lease in after.trial_leases] == ["fresh"]
