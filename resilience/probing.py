"""When the health monitor sends a probe: only where passive evidence is missing.

Envoy pairs active health checks with outlier detection: real traffic is the best
evidence of a route's health, so a synthetic probe is only worth its cost (tokens, and
a slot of the provider's rate limit) where real traffic says nothing. :func:`probe_decision`
is that rule, pure and timed by the ``now`` it is given:

* a half-open breaker (or an open one whose ``open_until`` has passed) is probed: probes
  are its trials;
* an open breaker before ``open_until`` and a forced-open route are not (we know);
* a route cooling down after a 429 is not: a probe would spend the very rate limit that
  is exhausted, and get another 429;
* a closed route is probed only when no real call finished on it for a whole probe
  interval.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from agent_failover.resilience.contracts import BreakerState, RouteHealth


class ProbeReason(StrEnum):
    """Why a route is (or is not) probed this round."""

    HALF_OPEN_TRIAL = "half_open_trial"
    NO_RECENT_TRAFFIC = "no_recent_traffic"
    RECENT_TRAFFIC = "recent_traffic"
    BREAKER_OPEN = "breaker_open"
    FORCED_OPEN = "forced_open"
    COOLING_DOWN = "cooling_down"


class ProbeDecision(BaseModel):
    """Probe the route now or not, and why (shown in the monitor's results)."""

    model_config = ConfigDict(frozen=True)

    probe: bool
    reason: ProbeReason
    detail: str = ""


def probe_decision(health: RouteHealth, *, now: float, interval_s: float) -> ProbeDecision:
    """Whether the monitor should probe ``health.route`` at ``now`` (see the module doc)."""
    state = health.breaker
    if state is BreakerState.FORCED_OPEN:
        return ProbeDecision(probe=False, reason=ProbeReason.FORCED_OPEN)
    if health.cooldown_until is not None and now < health.cooldown_until:
        return ProbeDecision(
            probe=False,
            reason=ProbeReason.COOLING_DOWN,
            detail=f"rate limited until {health.cooldown_until:.3f}",
        )
    if state is BreakerState.OPEN:
        if health.open_until is None or now < health.open_until:
            return ProbeDecision(probe=False, reason=ProbeReason.BREAKER_OPEN)
        return ProbeDecision(probe=True, reason=ProbeReason.HALF_OPEN_TRIAL)
    if state is BreakerState.HALF_OPEN:
        return ProbeDecision(probe=True, reason=ProbeReason.HALF_OPEN_TRIAL)
    last = health.last_call_at
    if last is not None and now - last < interval_s:
        return ProbeDecision(
            probe=False,
            reason=ProbeReason.RECENT_TRAFFIC,
            detail=f"a real call finished {now - last:.1f} s ago",
        )
    return ProbeDecision(probe=True, reason=ProbeReason.NO_RECENT_TRAFFIC)
