"""When the monitor probes: only where real traffic gave no evidence, never into a 429."""

from __future__ import annotations

import pytest

from agent_failover.resilience.contracts import BreakerState, RouteHealth
from agent_failover.resilience.probing import ProbeReason, probe_decision, probe_first_token_s

NOW = 1_000_000.0
INTERVAL = 12.0


def decide(**kw: object):
    return probe_decision(RouteHealth(route="r", **kw), now=NOW, interval_s=INTERVAL)


def test_idle_closed_route_is_probed() -> None:
    """No real call ever, or none for a whole interval: probe."""
    assert decide().reason is ProbeReason.NO_RECENT_TRAFFIC and decide().probe
    assert decide(last_call_at=NOW - INTERVAL).probe


def test_recent_real_traffic_replaces_the_probe() -> None:
    """A real call inside the interval is evidence enough: no probe (passive health)."""
    d = decide(last_call_at=NOW - 3.0)
    assert not d.probe and d.reason is ProbeReason.RECENT_TRAFFIC and "3.0 s" in d.detail


@pytest.mark.parametrize("state", [BreakerState.HALF_OPEN])
def test_half_open_is_probed_even_with_traffic(state: BreakerState) -> None:
    """Probes are a half-open breaker's trials, whatever the traffic."""
    d = decide(breaker=state, last_call_at=NOW - 1)
    assert d.probe and d.reason is ProbeReason.HALF_OPEN_TRIAL


def test_open_breaker_is_probed_every_interval() -> None:
    """Open, before or after open_until: probed (a good probe is what moves it to half-open),
    but not twice within an interval."""
    d = decide(breaker=BreakerState.OPEN, open_until=NOW + 100)
    assert d.probe and d.reason is ProbeReason.OPEN_RECOVERY_CHECK
    assert decide(breaker=BreakerState.OPEN, open_until=NOW).reason is ProbeReason.HALF_OPEN_TRIAL
    again = decide(breaker=BreakerState.OPEN, open_until=NOW + 100, last_probe_at=NOW - 2)
    assert not again.probe and again.reason is ProbeReason.RECENTLY_PROBED
    # A round one interval later is due even though the last probe took 2 s to finish.
    assert decide(breaker=BreakerState.OPEN, last_probe_at=NOW - INTERVAL + 2).probe


def test_half_open_is_probed_at_the_faster_cadence() -> None:
    """Half-open: due again after the half-open interval, not the whole probe interval."""
    health = RouteHealth(route="r", breaker=BreakerState.HALF_OPEN, last_probe_at=NOW - 3.0)
    assert probe_decision(health, now=NOW, interval_s=INTERVAL, half_open_interval_s=3.0).probe
    assert not probe_decision(health, now=NOW, interval_s=INTERVAL).probe


def test_idle_closed_route_probed_once_per_interval() -> None:
    """Faster rounds (while another route is half-open) do not probe idle routes faster."""
    assert not decide(last_probe_at=NOW - 3.0).probe
    assert decide(last_probe_at=NOW - INTERVAL).probe


def test_cooling_down_route_is_never_probed() -> None:
    """A probe into a 429 cool-down would spend the exhausted limit: skipped, any state."""
    for state in (BreakerState.CLOSED, BreakerState.HALF_OPEN):
        d = decide(breaker=state, cooldown_until=NOW + 5)
        assert not d.probe and d.reason is ProbeReason.COOLING_DOWN
    assert decide(cooldown_until=NOW).probe


def test_forced_open_is_not_probed_forced_closed_is() -> None:
    """An operator's forced-open route is left alone; forced-closed is probed when idle."""
    assert decide(breaker=BreakerState.FORCED_OPEN).reason is ProbeReason.FORCED_OPEN
    assert decide(breaker=BreakerState.FORCED_CLOSED).probe


def test_probes_per_minute_drop_with_traffic() -> None:
    """One route with a call every 5 s and one idle, probed every 12 s for 10 minutes:
    only the idle one is probed (50 rounds), the busy one never."""
    probes = {"busy": 0, "idle": 0}
    t = NOW
    for _ in range(50):
        t += INTERVAL
        busy = RouteHealth(route="busy", last_call_at=t - (t % 5.0))
        idle = RouteHealth(route="idle")
        for h in (busy, idle):
            probes[h.route] += probe_decision(h, now=t, interval_s=INTERVAL).probe
    assert probes == {"busy": 0, "idle": 50}


def test_trial_probes_wait_for_the_first_token_only_up_to_the_trial_line() -> None:
    """A recovery check or half-open trial is cut at the TTFT budget, not the probe timeout."""
    for reason in (ProbeReason.OPEN_RECOVERY_CHECK, ProbeReason.HALF_OPEN_TRIAL):
        assert probe_first_token_s(reason, 2000.0, 5.0) == 2.0
        assert probe_first_token_s(reason, 9000.0, 5.0) == 5.0  # never past the timeout
        assert probe_first_token_s(reason, None, 5.0) == 5.0
    assert probe_first_token_s(ProbeReason.NO_RECENT_TRAFFIC, 2000.0, 5.0) == 5.0


def test_a_user_call_in_flight_is_traffic() -> None:
    """A closed route gone silent mid-call: no probe while the call is in flight (it would
    be a second request to a silent route)."""
    health = RouteHealth(route="r", breaker=BreakerState.CLOSED, last_call_at=NOW - 10 * INTERVAL)
    d = probe_decision(health, now=NOW, interval_s=INTERVAL, in_flight=1)
    assert not d.probe and d.reason is ProbeReason.CALL_IN_FLIGHT and "1 user call" in d.detail
    assert probe_decision(health, now=NOW, interval_s=INTERVAL, in_flight=0).probe


def test_a_half_open_routes_probe_never_waits_for_trials_in_flight() -> None:
    """Half-open with every trial in flight (held, perhaps, by a worker that died): the
    probe still goes; it takes no trial slot, and it is what closes a healed route."""
    health = RouteHealth(
        route="r", breaker=BreakerState.HALF_OPEN, last_call_at=NOW - 10 * INTERVAL
    )
    d = probe_decision(health, now=NOW, interval_s=INTERVAL, in_flight=2)
    assert d.probe and d.reason is not ProbeReason.CALL_IN_FLIGHT


def test_an_open_routes_recovery_check_goes_with_a_call_in_flight() -> None:
    """An open route admits no user call, so a stuck one it holds must not delay the check
    that finds it healed."""
    health = RouteHealth(route="r", breaker=BreakerState.OPEN, open_until=NOW + 100)
    d = probe_decision(health, now=NOW, interval_s=INTERVAL, in_flight=2)
    assert d.probe and d.reason is ProbeReason.OPEN_RECOVERY_CHECK
