"""May a call, or a probe, go to a route now: the breaker's admission decisions.

:func:`admit` is asked before every real call: CLOSED permits, OPEN refuses until
``open_until`` (then moves to HALF_OPEN), and HALF_OPEN admits a bounded number of trials,
each holding a :class:`~resilience.breaker.TrialLease` on its slot that lapses after the
attempt's timeout plus the grace (a holder that died never reports). :func:`admit_probe`
is asked by the health monitor: a probe never takes or waits for a real call's slot. Both
are pure, take ``now`` and return the new breaker with the decision (:class:`Admission`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from agent_failover.resilience.breaker import (
    DEFAULT_TRIAL_HOLD_S,
    Breaker,
    Transition,
    TrialLease,
    tick,
)
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState
from agent_failover.resilience.trip_rules import BreakerReason

_S = BreakerState
_R = BreakerReason


class Admission(BaseModel):
    """May a call go to the route now? A rejection names the route and breaker state."""

    model_config = ConfigDict(frozen=True)

    route: str
    permitted: bool
    trial: bool = False
    reason: BreakerReason | None = None
    retry_at: float | None = None
    state: BreakerState = BreakerState.CLOSED
    #: The trial slot a permitted trial holds: give it back with its id (the outcome's
    #: ``trial_lease``, or ``release_trial``).
    lease: str | None = None

    def __str__(self) -> str:
        if self.permitted:
            kind = "trial call" if self.trial else "call"
            return f"{kind} permitted on {self.route!r} (breaker {self.state.value})"
        why = f" ({self.reason.value})" if self.reason else ""
        until = f" until {self.retry_at:.3f}" if self.retry_at is not None else ""
        return f"call not permitted: breaker {self.route!r} is {self.state.value}{why}{until}"


def admit(
    b: Breaker,
    s: BreakerSettings,
    now: float,
    *,
    hold_s: float = DEFAULT_TRIAL_HOLD_S,
    lease_id: str = "",
) -> tuple[Breaker, Admission, Transition | None]:
    """Decide whether a real call may go to the route now.

    CLOSED and FORCED_CLOSED permit; FORCED_OPEN rejects; OPEN rejects until
    ``open_until``, then moves to HALF_OPEN; HALF_OPEN admits a trial while fewer than
    ``half_open_max_trials`` leases are live, and the returned breaker holds a new lease
    ``lease_id`` (default: one derived from the version) until ``now + hold_s +
    trial_lease_grace_s``. Expired leases are dropped first; with every slot held the
    rejection says ``TRIAL_SLOTS_FULL`` and ``retry_at`` the first lease's expiry.
    """
    b, moved = tick(b, now)
    state = b.state
    if state in (_S.CLOSED, _S.FORCED_CLOSED):
        return b, Admission(route=b.route, permitted=True, state=state), moved
    if state is _S.FORCED_OPEN:
        return (
            b,
            Admission(route=b.route, permitted=False, reason=_R.FORCED_OPEN, state=state),
            moved,
        )
    if state is _S.OPEN:
        rejection = Admission(
            route=b.route, permitted=False, reason=b.reason, retry_at=b.open_until, state=state
        )
        return b, rejection, moved
    # HALF_OPEN: a bounded number of concurrent trials, like resilience4j's
    # permittedNumberOfCallsInHalfOpenState, so a recovering route is not stampeded.
    b = _pruned(b, now)
    if len(b.trial_leases) >= s.half_open_max_trials:
        first = min(lease.expires_at for lease in b.trial_leases)
        rejection = Admission(
            route=b.route,
            permitted=False,
            reason=_R.TRIAL_SLOTS_FULL,
            retry_at=first,
            state=state,
        )
        return b, rejection, moved
    lease = TrialLease(
        id=lease_id or f"v{b.version + 1}",
        expires_at=now + max(hold_s, 0.0) + s.trial_lease_grace_s,
    )
    b = b.model_copy(update={"trial_leases": (*b.trial_leases, lease), "version": b.version + 1})
    admission = Admission(
        route=b.route, permitted=True, trial=True, reason=b.reason, state=state, lease=lease.id
    )
    return b, admission, moved


def admit_probe(b: Breaker, now: float) -> tuple[Breaker, Admission, Transition | None]:
    """Decide whether the health monitor may probe the route now.

    A probe never takes or waits for a real call's trial slot: the monitor sends at most
    one per route per round, and a half-open route's probes are what closes it, so a set
    of slots held by calls that never report must not keep it from being probed. Only
    FORCED_OPEN rejects; an OPEN route past ``open_until`` moves to HALF_OPEN (the probe
    is then a trial, ``Admission.trial``, without a lease).
    """
    b, moved = tick(b, now)
    if b.state is _S.FORCED_OPEN:
        rejection = Admission(route=b.route, permitted=False, reason=_R.FORCED_OPEN, state=b.state)
        return b, rejection, moved
    half_open = b.state is _S.HALF_OPEN
    admission = Admission(
        route=b.route, permitted=True, trial=half_open, reason=b.reason, state=b.state
    )
    return b, admission, moved


def _pruned(b: Breaker, now: float) -> Breaker:
    """``b`` without the trial leases expired at ``now`` (a dead holder's slot lapses)."""
    live = b.live_leases(now)
    if len(live) == len(b.trial_leases):
        return b
    return b.model_copy(update={"trial_leases": live, "version": b.version + 1})


#: Default bound on the age of a breaker read that may answer a call's admission
#: (:func:`admit_from_read`): a breaker another worker opened after the read admits
#: calls here for at most this long.
DEFAULT_ADMIT_FROM_READ_S = 1.0


def admit_from_read(b: Breaker, now: float, age_s: float, max_age_s: float) -> Admission | None:
    """The admission a recent read of the breaker already answers, or None (ask the store).

    Only a CLOSED or FORCED_CLOSED breaker read at most ``max_age_s`` ago answers: its
    admission is a pure read (no lease, no write, no time-driven move), so a fresh read is
    as good as a new one except for what changed since, which is bounded by the age. An
    OPEN breaker (it may be due for HALF_OPEN), a HALF_OPEN one (a trial needs a lease,
    taken by compare-and-set), a forced-open one and a route in a 429's cool-down at
    ``now`` always go to the store, as does a read of negative age (a clock gone back).
    """
    if b.state not in (_S.CLOSED, _S.FORCED_CLOSED):
        return None
    if b.cooldown_until is not None and b.cooldown_until > now:
        return None
    if not 0.0 <= age_s <= max_age_s:
        return None
    return Admission(route=b.route, permitted=True, state=b.state)
