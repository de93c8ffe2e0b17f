"""The circuit breaker of one route as an immutable value and a checked transition table.

Modelled on resilience4j's ``CircuitBreakerStateMachine``: explicit states
(:class:`~resilience.contracts.BreakerState`), a table of legal moves that raises
:class:`IllegalTransition` for anything else, decisions returned as values
(:class:`Transition`, and :class:`~resilience.admission.Admission` from
:mod:`resilience.admission`) with an enum reason, and the time injected as
``now``. The functions never mutate their input: they return a new :class:`Breaker`
whose ``version`` is one higher whenever anything changed, so stores can persist it
with compare-and-set and many workers can record at once.

States and moves::

    CLOSED ──trip (window rules: error rate, slow calls, p95 over the baseline, semantic
              failures; N failures in a row; auth, quota, 529+Retry-After; on probation
              after a close: one failure)──▶ OPEN
    OPEN ──now >= open_until (admit/tick), or a good probe at any time──▶ HALF_OPEN
    HALF_OPEN ──N consecutive good trials (real-call trials or probes)──▶ CLOSED
    HALF_OPEN ──bad trial──▶ OPEN (longer: open_duration x multiplier^(trips-1), capped)
    any ──force──▶ FORCED_OPEN / FORCED_CLOSED ──release──▶ CLOSED

A breaker never closes because a cool-down lapsed: only good trials close it.

Return to the primary: the health monitor keeps probing an OPEN route at its probe
interval (not before a Retry-After the trip carried: that also sets ``cooldown_until``);
a good probe moves it to HALF_OPEN at once (counting as its first good trial),
and failed probes while OPEN change nothing (they do not extend ``open_until``). Only a
failed half-open trial (a probe or a real call) re-opens it, for
``open_duration x multiplier^(trips-1)`` capped at ``max_open_duration_s``. So a healed
route returns within about one probe interval plus the half-open probes that close it,
and a flapping one never closes, since closing needs N good trials in a row.

Opening fast: the window's error rate needs ``min_calls`` outcomes and a share of
failures diluted by the successes before the outage, so ``consecutive_failures`` (Envoy's
``consecutive_5xx``) opens a closed breaker after that many failures in a row whatever
the rate, and ``consecutive_timeouts`` after fewer when they are time-budget failures
(a slow first token, a stalled stream: each cost its caller the whole budget); any
success resets the count. And for ``probation_s`` after good trials close a
breaker, a single failure re-opens it: a route that just recovered has not yet earned
the benefit of the doubt, so a flapping primary costs one failed call per flap, not N.

Trial slots are leases. A real call admitted as a half-open trial holds one of
``half_open_max_trials`` slots, each a :class:`TrialLease` with an id and an expiry (the
attempt's timeout plus ``trial_lease_grace_s``). Its outcome (or a cancel) gives back
that lease; a lease whose holder died without reporting (a SIGKILLed worker) lapses at
its expiry, so slots never leak. A full set of live leases rejects with
``TRIAL_SLOTS_FULL`` and ``retry_at`` the first expiry. Probes are admitted apart
(:func:`resilience.admission.admit_probe`): they never wait for, nor take, a real call's
trial slot.

A 429 is not a state: it sets ``cooldown_until`` (Retry-After, or the policy's default)
in any state, which the planner and the health monitor read to keep real calls and
probes away until the provider's window resets. One rate limit must not take a healthy
route out for the breaker's open duration, so a 429 never trips or re-opens a breaker.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState, CallOutcome, WindowStats
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.trip_rules import BreakerReason, rate_trip

#: How long a trial lease lasts when the caller does not say how long its attempt may
#: take (the attempt's timeout plus the grace is the normal case).
DEFAULT_TRIAL_HOLD_S = 60.0


class TrialLease(BaseModel):
    """One half-open trial slot, held by one admitted attempt until ``expires_at``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    expires_at: float


class Breaker(BaseModel):
    """The persisted state of one route's breaker."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    route: str
    state: BreakerState = BreakerState.CLOSED
    since: float = 0.0
    open_until: float | None = None
    trips: int = 0  # consecutive trips; reset when the breaker closes
    #: Half-open trial slots held by admitted real calls (expired ones are pruned on the
    #: next admission or release, and ignored by :meth:`live_leases` meanwhile).
    trial_leases: tuple[TrialLease, ...] = ()
    consecutive_good: int = 0
    #: Failures in a row while CLOSED (counting against the route; 429s excluded).
    consecutive_failures: int = 0
    #: Of those, time-budget failures in a row (first token, stalled stream, no response).
    consecutive_timeouts: int = 0
    reason: BreakerReason | None = None
    #: A 429's cool-down: no planned call or probe before this (admission ignores it, so
    #: the same-route retry scheduled for exactly Retry-After is never refused).
    cooldown_until: float | None = None
    version: int = 0

    @model_validator(mode="before")
    @classmethod
    def _drop_counted_slots(cls, data: Any) -> Any:
        # Breakers written before leases counted their trial slots without an expiry: a
        # slot taken by a worker that died stayed taken for good. Such counts are dropped
        # on read (at worst a few extra trials are admitted once, during the upgrade).
        if isinstance(data, dict) and "trials_in_flight" in data:
            data = {k: v for k, v in data.items() if k != "trials_in_flight"}
        return data

    def live_leases(self, now: float) -> tuple[TrialLease, ...]:
        """The trial leases still held at ``now``."""
        return tuple(lease for lease in self.trial_leases if lease.expires_at > now)

    def trials_in_flight(self, now: float) -> int:
        """Half-open trial slots held at ``now`` (expired leases do not count)."""
        return len(self.live_leases(now))


class Transition(BaseModel):
    """A state change, returned so callers can log it, count it and emit telemetry."""

    model_config = ConfigDict(frozen=True)

    route: str
    from_state: BreakerState
    to_state: BreakerState
    reason: BreakerReason
    at: float
    open_until: float | None = None


class IllegalTransition(Exception):
    """A move the transition table does not allow (e.g. OPEN straight to CLOSED)."""

    def __init__(self, route: str, from_state: BreakerState, to_state: BreakerState, why: str):
        self.route = route
        self.from_state = from_state
        self.to_state = to_state
        super().__init__(
            f"breaker {route!r}: illegal transition {from_state.value} -> {to_state.value} ({why})"
        )


_S = BreakerState
_R = BreakerReason
_TRIP_REASONS = frozenset(
    {
        _R.ERROR_RATE,
        _R.SLOW_CALLS,
        _R.P95_ABOVE_BASELINE,
        _R.SEMANTIC_FAILURES,
        _R.RATE_LIMITED,
        _R.QUOTA_EXHAUSTED,
        _R.AUTH_FAILURE,
        _R.MODEL_NOT_FOUND,
        _R.OVERLOADED,
        _R.CONSECUTIVE_FAILURES,
        _R.CONSECUTIVE_TIMEOUTS,
        _R.PROBATION_FAILED,
    }
)
_FORCE = {_S.FORCED_OPEN: _R.FORCED_OPEN, _S.FORCED_CLOSED: _R.FORCED_CLOSED}

# The only legal moves and the reasons allowed for each; everything else raises.
TRANSITIONS: dict[tuple[BreakerState, BreakerState], frozenset[BreakerReason]] = {
    (_S.CLOSED, _S.OPEN): _TRIP_REASONS,
    (_S.OPEN, _S.HALF_OPEN): frozenset({_R.OPEN_DURATION_ELAPSED, _R.PROBE_SUCCEEDED}),
    (_S.HALF_OPEN, _S.CLOSED): frozenset({_R.TRIALS_PASSED}),
    (_S.HALF_OPEN, _S.OPEN): frozenset({_R.TRIAL_FAILED}) | _TRIP_REASONS,
    (_S.FORCED_OPEN, _S.CLOSED): frozenset({_R.RELEASED}),
    (_S.FORCED_CLOSED, _S.CLOSED): frozenset({_R.RELEASED}),
    (_S.FORCED_OPEN, _S.FORCED_CLOSED): frozenset({_R.FORCED_CLOSED}),
    (_S.FORCED_CLOSED, _S.FORCED_OPEN): frozenset({_R.FORCED_OPEN}),
    **{
        (src, dst): frozenset({reason})
        for src in (_S.CLOSED, _S.OPEN, _S.HALF_OPEN)
        for dst, reason in _FORCE.items()
    },
}

# Error classes that open the breaker on the first occurrence: waiting for an error
# rate would keep sending traffic to a route that cannot succeed (bad key, no quota).
_IMMEDIATE = {
    ErrorClass.AUTH: _R.AUTH_FAILURE,
    ErrorClass.QUOTA_EXHAUSTED: _R.QUOTA_EXHAUSTED,
    ErrorClass.MODEL_NOT_FOUND: _R.MODEL_NOT_FOUND,
}
# Error classes that open the breaker when the provider says how long to stay away. A
# 529/503 is the provider's capacity with no known end; a 429 (our quota window) only
# cools the route down (see ``cool_down``).
_BACKPRESSURE = {ErrorClass.OVERLOADED: _R.OVERLOADED}
# Failures that cost the caller the role's whole time budget before it could fail over,
# so fewer in a row are tolerated (``consecutive_timeouts``).
_TIMEOUTS = frozenset(
    {ErrorClass.SLOW_FIRST_TOKEN, ErrorClass.NO_RESPONSE, ErrorClass.STREAM_STALLED}
)


def transition(
    b: Breaker,
    to_state: BreakerState,
    reason: BreakerReason,
    now: float,
    *,
    open_until: float | None = None,
) -> tuple[Breaker, Transition]:
    """Apply one move from the table, or raise :class:`IllegalTransition`.

    Entering OPEN requires ``open_until`` and counts a trip; entering CLOSED resets the
    trip count; every move resets trial bookkeeping.
    """
    allowed = TRANSITIONS.get((b.state, to_state))
    if allowed is None:
        raise IllegalTransition(b.route, b.state, to_state, "no such move")
    if reason not in allowed:
        raise IllegalTransition(b.route, b.state, to_state, f"reason {reason.value} not allowed")
    if to_state is _S.OPEN and open_until is None:
        raise IllegalTransition(b.route, b.state, to_state, "entering OPEN needs open_until")
    trips = b.trips
    if to_state is _S.OPEN:
        trips += 1
    elif to_state in (_S.CLOSED, _S.FORCED_CLOSED):
        trips = 0
    new = b.model_copy(
        update={
            "state": to_state,
            "since": now,
            "open_until": open_until if to_state is _S.OPEN else None,
            "trips": trips,
            "trial_leases": (),
            "consecutive_good": 0,
            "consecutive_failures": 0,
            "consecutive_timeouts": 0,
            "reason": reason,
            "version": b.version + 1,
        }
    )
    return new, Transition(
        route=b.route,
        from_state=b.state,
        to_state=to_state,
        reason=reason,
        at=now,
        open_until=new.open_until,
    )


def _trip(
    b: Breaker, s: BreakerSettings, reason: BreakerReason, now: float, retry_after: float | None
) -> tuple[Breaker, Transition]:
    # The trip about to happen is number b.trips + 1; Retry-After is a floor, never a cap.
    duration = s.open_duration_for(b.trips + 1)
    if retry_after is not None and retry_after > duration:
        duration = retry_after
    opened, moved = transition(b, _S.OPEN, reason, now, open_until=now + duration)
    if retry_after:
        # The provider said when to come back: no probe before then either (the monitor
        # probes open routes to find recovery early, but not against a stated Retry-After).
        opened = _cool_until(opened, now + retry_after)
    return opened, moved


def _cool_until(b: Breaker, until: float) -> Breaker:
    if b.cooldown_until is not None and b.cooldown_until >= until:
        return b
    return b.model_copy(update={"cooldown_until": until})


def tick(b: Breaker, now: float) -> tuple[Breaker, Transition | None]:
    """Move OPEN to HALF_OPEN once ``open_until`` has passed (the health monitor's timer)."""
    if b.state is _S.OPEN and b.open_until is not None and now >= b.open_until:
        return transition(b, _S.HALF_OPEN, _R.OPEN_DURATION_ELAPSED, now)
    return b, None


def _without_lease(b: Breaker, lease_id: str | None, now: float) -> Breaker:
    """``b`` with lease ``lease_id`` given back (None: the first to expire, for callers
    that did not keep the id) and expired leases dropped."""
    live = b.live_leases(now)
    if lease_id is None and live:
        lease_id = min(live, key=lambda lease: lease.expires_at).id
    kept = tuple(lease for lease in live if lease.id != lease_id)
    if len(kept) == len(b.trial_leases):
        return b
    return b.model_copy(update={"trial_leases": kept, "version": b.version + 1})


def is_good_trial(outcome: CallOutcome, s: BreakerSettings) -> bool:
    """A trial is good only if it succeeded, was semantically valid and fast enough.

    Fast enough: time to first token (the latency, when no token time was measured) at
    most ``trial_latency_ms``. Callers resolve the line (``PolicyConfig.trial_settings``:
    the role's TTFT budget by default); None here means no line at all.
    """
    if not outcome.ok or outcome.semantic_failure:
        return False
    first = outcome.ttft_ms if outcome.ttft_ms is not None else outcome.latency_ms
    return s.trial_latency_ms is None or first <= s.trial_latency_ms


def cool_down(b: Breaker, outcome: CallOutcome, now: float) -> Breaker:
    """Extend ``cooldown_until`` to ``now + retry_after_s`` for a 429; never shorten it."""
    if outcome.error_class is not ErrorClass.RATE_LIMITED or not outcome.retry_after_s:
        return b
    until = now + outcome.retry_after_s
    if b.cooldown_until is not None and b.cooldown_until >= until:
        return b
    return b.model_copy(update={"cooldown_until": until, "version": b.version + 1})


def on_outcome(
    b: Breaker, outcome: CallOutcome, stats: WindowStats, s: BreakerSettings, now: float
) -> tuple[Breaker, Transition | None]:
    """Feed one outcome (already included in ``stats``) to the breaker.

    CLOSED trips on the error, slow-call or semantic rate once ``stats.enough_samples``,
    at once on auth or quota errors, and on an overload carrying Retry-After (then
    ``open_until >= now + retry_after``). HALF_OPEN counts trials and probes: N good in
    a row close it, one bad reopens it for longer. OPEN moves to HALF_OPEN on a good
    probe and otherwise only lets a Retry-After extend ``open_until`` (a failed probe does
    not); forced states ignore outcomes. A 429 in any state only sets the cool-down
    (:func:`cool_down`).
    """
    b = cool_down(b, outcome, now)
    if b.state is _S.CLOSED:
        return _on_closed(b, outcome, stats, s, now)
    if b.state is _S.HALF_OPEN:
        return _on_half_open(b, outcome, s, now)
    if b.state is _S.OPEN and outcome.probe and is_good_trial(outcome, s):
        return _probe_recovered(b, s, now)
    if b.state is _S.OPEN and outcome.retry_after_s and outcome.error_class is not None:
        if outcome.error_class in _BACKPRESSURE or outcome.error_class in _IMMEDIATE:
            until = now + outcome.retry_after_s
            if b.open_until is None or until > b.open_until:
                b = _cool_until(b, until)
                return b.model_copy(update={"open_until": until, "version": b.version + 1}), None
    return b, None


def _probe_recovered(b: Breaker, s: BreakerSettings, now: float) -> tuple[Breaker, Transition]:
    """A good probe of an OPEN route: HALF_OPEN now, the probe its first good trial."""
    half, moved = transition(b, _S.HALF_OPEN, _R.PROBE_SUCCEEDED, now)
    if s.close_after_consecutive_successes <= 1:
        return transition(half, _S.CLOSED, _R.TRIALS_PASSED, now)
    return half.model_copy(update={"consecutive_good": 1}), moved


def _on_closed(
    b: Breaker, outcome: CallOutcome, stats: WindowStats, s: BreakerSettings, now: float
) -> tuple[Breaker, Transition | None]:
    ec = outcome.error_class
    if not outcome.ok and outcome.counts_against_route and ec is not None:
        if ec in _IMMEDIATE:
            return _trip(b, s, _IMMEDIATE[ec], now, outcome.retry_after_s)
        if ec in _BACKPRESSURE and outcome.retry_after_s is not None:
            return _trip(b, s, _BACKPRESSURE[ec], now, outcome.retry_after_s)
    b, reason = _count_in_a_row(b, outcome, s, now)
    if reason is not None:
        return _trip(b, s, reason, now, None)
    reason = rate_trip(stats, s)
    if reason is not None:
        return _trip(b, s, reason, now, None)
    return b, None


def _on_probation(b: Breaker, s: BreakerSettings, now: float) -> bool:
    """Closed by good trials less than ``probation_s`` ago (an operator's release is not)."""
    return b.reason is _R.TRIALS_PASSED and now - b.since < s.probation()


def _count_in_a_row(
    b: Breaker, outcome: CallOutcome, s: BreakerSettings, now: float
) -> tuple[Breaker, BreakerReason | None]:
    """Track failures (and time-budget failures) in a row on a CLOSED breaker; name the
    trip reason when due.

    A failure counts if it counts against the route and is neither a 429 (a quota
    window, :func:`cool_down`'s business) nor a semantic failure (its own rate); a
    timeout (:data:`_TIMEOUTS`) counts in both rows. A success resets both; anything
    else (an invalid request, a content filter) leaves them alone.
    """
    if outcome.ok:
        if b.consecutive_failures == 0 and b.consecutive_timeouts == 0:
            return b, None
        reset = {"consecutive_failures": 0, "consecutive_timeouts": 0, "version": b.version + 1}
        return b.model_copy(update=reset), None
    failed = (
        outcome.counts_against_route
        and not outcome.semantic_failure  # semantic failures have their own rate
        and outcome.error_class is not ErrorClass.RATE_LIMITED
    )
    if not failed:
        return b, None
    if _on_probation(b, s, now):
        return b, _R.PROBATION_FAILED
    timeouts = b.consecutive_timeouts + (outcome.error_class in _TIMEOUTS)
    count = b.consecutive_failures + 1
    b = b.model_copy(
        update={
            "consecutive_failures": count,
            "consecutive_timeouts": timeouts,
            "version": b.version + 1,
        }
    )
    if s.consecutive_timeouts is not None and timeouts >= s.consecutive_timeouts:
        return b, _R.CONSECUTIVE_TIMEOUTS
    if s.consecutive_failures is not None and count >= s.consecutive_failures:
        return b, _R.CONSECUTIVE_FAILURES
    return b, None


def _on_half_open(
    b: Breaker, outcome: CallOutcome, s: BreakerSettings, now: float
) -> tuple[Breaker, Transition | None]:
    if not (outcome.trial or outcome.probe):
        # A call admitted before the trip finishing late is not evidence of recovery.
        return b, None
    if outcome.trial:
        # The call held a trial lease: give it back (a probe holds none, see admit_probe).
        b = _without_lease(b, outcome.trial_lease, now)
    if not outcome.counts_against_route:
        # Content filter / context length / invalid request say nothing about the route.
        return b, None
    if not is_good_trial(outcome, s):
        return _trip(b, s, _R.TRIAL_FAILED, now, outcome.retry_after_s)
    good = b.consecutive_good + 1
    if good >= s.close_after_consecutive_successes:
        return transition(b, _S.CLOSED, _R.TRIALS_PASSED, now)
    return b.model_copy(update={"consecutive_good": good, "version": b.version + 1}), None


def force(b: Breaker, target: BreakerState | None, now: float) -> tuple[Breaker, Transition]:
    """Operator override: hold FORCED_OPEN / FORCED_CLOSED, or ``None`` to release to CLOSED.

    Forced states hold whatever outcomes arrive; forcing the state a breaker is already
    in, or releasing one that is not forced, raises :class:`IllegalTransition`.
    """
    if target is None:
        return transition(b, _S.CLOSED, _R.RELEASED, now)
    if target not in _FORCE:
        raise IllegalTransition(b.route, b.state, target, "only forced states can be forced")
    return transition(b, target, _FORCE[target], now)


def release_trial(b: Breaker, now: float, lease_id: str | None = None) -> Breaker:
    """Give back the half-open trial lease ``lease_id`` of a call admitted but never
    reported (a cancelled hedge loser, a refused rate budget); expired leases go too.

    ``lease_id`` None gives back the lease that expires first.
    """
    if b.state is not _S.HALF_OPEN or not b.trial_leases:
        return b
    return _without_lease(b, lease_id, now)
