"""When the health monitor sends a probe: only where passive evidence is missing.

Envoy pairs active health checks with outlier detection: real traffic is the best
evidence of a route's health, so a synthetic probe is only worth its cost (tokens, and
a slot of the provider's rate limit) where real traffic says nothing. :func:`probe_decision`
is that rule, pure and timed by the ``now`` it is given:

* an open breaker is probed once per probe interval, before and after ``open_until``:
  a good probe is what moves it to half-open (:mod:`resilience.breaker`), so a healed
  route is found within one interval, whatever its open duration;
* a half-open breaker is probed faster (``half_open_interval_s``): its probes are the
  trials that close it;
* a forced-open route is not (an operator said so);
* a route cooling down after a 429 is not: a probe would spend the very rate limit that
  is exhausted, and get another 429;
* a closed route with a user call in flight is not (``in_flight``, the leases of
  :mod:`stores.in_flight`): the call is traffic, and its outcome the evidence a probe
  would fetch; a route that went silent mid-call would otherwise get a second request
  from the probe. A half-open or open route's probe still goes: it takes no trial slot
  (probes have their own admission), and the calls it would wait for may be held by a
  worker that died (their leases lapse only at the attempt's timeout), which would keep
  a healed route half-open;
* a closed route is probed only when neither a real call nor a probe finished on it for
  a probe interval.

A probe of an open or half-open route is good only if its first token comes within the
breaker's trial line (the TTFT budget), so :func:`probe_first_token_s` makes that its
first-token deadline: waiting out ``probes.timeout_s`` for a token that already
disqualifies the probe would hold the monitor's round (a probe sent into a brownout just
before recovery delayed the next, good one by the whole timeout).

"Due" allows :data:`DUE_FRACTION` of the interval: the monitor's rounds are one interval
apart, give or take its timers and activity dispatch, and a route must not skip every
other round for that. ``last_probe_at`` is when the last probe was *sent* (the probe
activity stamps it so): stamped when it finished, a probe that waited 2 s for a first
token in a 3 s interval made the next round skip the route (probes every 6 s).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from agent_failover.resilience.contracts import BreakerState, RouteHealth

#: Share of an interval after which the next probe of a route is due (see the module doc).
DUE_FRACTION = 0.75


class ProbeReason(StrEnum):
    """Why a route is (or is not) probed this round."""

    HALF_OPEN_TRIAL = "half_open_trial"
    OPEN_RECOVERY_CHECK = "open_recovery_check"
    NO_RECENT_TRAFFIC = "no_recent_traffic"
    RECENT_TRAFFIC = "recent_traffic"
    RECENTLY_PROBED = "recently_probed"
    FORCED_OPEN = "forced_open"
    COOLING_DOWN = "cooling_down"
    CALL_IN_FLIGHT = "call_in_flight"


class ProbeDecision(BaseModel):
    """Probe the route now or not, and why (shown in the monitor's results)."""

    model_config = ConfigDict(frozen=True)

    probe: bool
    reason: ProbeReason
    detail: str = ""


def _probed_within(health: RouteHealth, now: float, interval_s: float) -> bool:
    last = health.last_probe_at
    return last is not None and now - last < DUE_FRACTION * interval_s


def probe_decision(
    health: RouteHealth,
    *,
    now: float,
    interval_s: float,
    half_open_interval_s: float | None = None,
    in_flight: int = 0,
) -> ProbeDecision:
    """Whether the monitor should probe ``health.route`` at ``now`` (see the module doc).

    ``half_open_interval_s`` is the half-open cadence (``interval_s`` when None);
    ``in_flight`` how many user calls are in flight on the route.
    """
    state = health.breaker
    if state is BreakerState.FORCED_OPEN:
        return ProbeDecision(probe=False, reason=ProbeReason.FORCED_OPEN)
    if health.cooldown_until is not None and now < health.cooldown_until:
        return ProbeDecision(
            probe=False,
            reason=ProbeReason.COOLING_DOWN,
            detail=f"rate limited until {health.cooldown_until:.3f}",
        )
    half_open = state is BreakerState.HALF_OPEN or (
        state is BreakerState.OPEN and health.open_until is not None and now >= health.open_until
    )
    if in_flight > 0 and state is BreakerState.CLOSED and not half_open:
        return ProbeDecision(
            probe=False,
            reason=ProbeReason.CALL_IN_FLIGHT,
            detail=f"{in_flight} user call(s) in flight",
        )
    cadence = (half_open_interval_s or interval_s) if half_open else interval_s
    if _probed_within(health, now, cadence):
        last = health.last_probe_at or 0.0
        return ProbeDecision(
            probe=False,
            reason=ProbeReason.RECENTLY_PROBED,
            detail=f"probed {now - last:.1f} s ago",
        )
    if half_open:
        return ProbeDecision(probe=True, reason=ProbeReason.HALF_OPEN_TRIAL)
    if state is BreakerState.OPEN:
        return ProbeDecision(probe=True, reason=ProbeReason.OPEN_RECOVERY_CHECK)
    last = health.last_call_at
    if last is not None and now - last < interval_s:
        return ProbeDecision(
            probe=False,
            reason=ProbeReason.RECENT_TRAFFIC,
            detail=f"a real call finished {now - last:.1f} s ago",
        )
    return ProbeDecision(probe=True, reason=ProbeReason.NO_RECENT_TRAFFIC)


#: Probes whose first token is judged against the breaker's trial line.
_TRIAL_PROBES = frozenset({ProbeReason.OPEN_RECOVERY_CHECK, ProbeReason.HALF_OPEN_TRIAL})


def probe_first_token_s(
    reason: ProbeReason, trial_latency_ms: float | None, timeout_s: float
) -> float:
    """Seconds a probe waits for its first token (see the module doc).

    A recovery check or half-open trial waits at most the trial line
    (``trial_latency_ms``); a closed route's probe, which measures latency, the whole
    ``timeout_s``.
    """
    if reason not in _TRIAL_PROBES or trial_latency_ms is None:
        return timeout_s
    return min(timeout_s, trial_latency_ms / 1000.0)
