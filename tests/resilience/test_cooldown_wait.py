"""A short Retry-After another request met (a probe's 429) is waited out on the route the
plan starts with, by the rule of the call's own 429 (issue 22 §1.7)."""

from __future__ import annotations

import pytest

from agent_failover.config.loader import load_policy
from agent_failover.resilience.contracts import HealthSnapshot, RouteHealth
from agent_failover.resilience.cooldown_wait import plan_waiting_out
from agent_failover.resilience.plan import RequestFacts
from agent_failover.resilience.planner import plan
from tests.resilience.conftest import DEMO_POLICY

NOW = 1_000_000.0
POLICY = load_policy(DEMO_POLICY, env={})
PRIMARY = "anthropic-us-east"
ROLE = POLICY.role("researcher")
SHORT_S = POLICY.rate_limit.max_wait_ms / 1000 * 0.75


def _snap(cooldown_s: float) -> HealthSnapshot:
    h = RouteHealth(route=PRIMARY, cooldown_until=NOW + cooldown_s)
    return HealthSnapshot(taken_at=NOW, routes={PRIMARY: h})


def _facts(**kw: object) -> RequestFacts:
    return RequestFacts(input_tokens=100, max_output_tokens=100, **kw)


def test_short_shared_cooldown_is_waited_out_on_the_primary() -> None:
    """The primary comes first after the wait (before: skipped, the call failed over);
    the plan is made as of the wait's end: its budget is spent by the wait."""
    assert ROLE.roster.tier0[0] == PRIMARY
    skipped = plan(ROLE, POLICY, _snap(SHORT_S), _facts(), NOW)
    assert PRIMARY not in [a.route for a in skipped.attempts]
    p = plan_waiting_out(ROLE, POLICY, _snap(SHORT_S), _facts(), NOW)
    first = p.attempts[0]
    assert first.route == PRIMARY, p.explain()
    assert first.wait_ms == pytest.approx(SHORT_S * 1000)
    assert p.remaining_ms == pytest.approx(ROLE.total_budget_ms - SHORT_S * 1000)
    assert "short Retry-After" in first.why and any("Retry-After" in n for n in p.notes)


@pytest.mark.parametrize(
    ("cooldown_s", "facts"),
    [
        # Longer than rate_limit.max_wait_ms: fail over now, as for the call's own 429.
        (POLICY.rate_limit.max_wait_ms / 1000 + 1.0, _facts()),
        # The call's own 429 on the route already chose to fail over.
        (SHORT_S, _facts(cooldowns={PRIMARY: NOW + SHORT_S})),
        # The wait would leave the attempt less than its TTFT budget before the deadline.
        (SHORT_S, _facts(elapsed_ms=ROLE.total_budget_ms - 1000 * SHORT_S)),
        # A run recorded before the change (its patch says so).
        (SHORT_S, _facts(wait_out_cooldowns=False)),
    ],
)
def test_the_route_is_skipped_when_waiting_does_not_fit(
    cooldown_s: float, facts: RequestFacts
) -> None:
    p = plan_waiting_out(ROLE, POLICY, _snap(cooldown_s), facts, NOW)
    assert p == plan(ROLE, POLICY, _snap(cooldown_s), facts, NOW)
    assert all(a.wait_ms == 0 for a in p.attempts)
