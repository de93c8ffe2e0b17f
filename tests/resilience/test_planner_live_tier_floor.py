"""The live-tier floor (issue 22 §2.2): once the budget is spent, each live tier this call
has not tried still gets one attempt with the role's floor budget, before the cache and
the static fallback; time lost to a killed worker never skips a healthy standby."""

from __future__ import annotations

import pytest

from agent_failover.resilience.config import RolePolicy
from agent_failover.resilience.contracts import BreakerState
from agent_failover.resilience.plan import SkipReason
from agent_failover.resilience.planner import plan
from tests.resilience.test_planner import NOW, POLICY, facts, health, role, snap


def _critic(**update: object) -> RolePolicy:
    return role("critic", **update)  # total 15 s, attempt 6 s, TTFT 2 s


def _tiers(p) -> list[int]:
    return [a.tier for a in p.attempts]


@pytest.mark.parametrize("left_ms", [0.0, 500.0, 1_999.0])
def test_each_live_tier_gets_an_attempt_when_the_budget_is_nearly_spent(left_ms: float) -> None:
    """Less than the TTFT budget left (15.5 s of 15 s spent, as after a lost worker): one
    attempt per live tier, sequential, each with the floor (the TTFT budget), in tier
    order, before cache and static."""
    r = _critic()
    elapsed = max(r.total_budget_ms - left_ms, 0.0) + (500.0 if left_ms == 0 else 0.0)
    p = plan(r, POLICY, snap(), facts(elapsed_ms=elapsed), NOW)
    assert _tiers(p) == [0, 1, 2]
    assert all(a.floor and not a.hedge for a in p.attempts)
    assert {a.timeout_ms for a in p.attempts} == {r.ttft_budget_ms}
    starts = [a.worst_case_start_ms for a in p.attempts]
    assert starts == [i * r.ttft_budget_ms for i in range(3)]
    assert "FLOOR" in p.explain()[1] and "live-tier floor" in p.attempts[0].why
    # The other routes of each tier are skipped for budget, as before.
    assert {s.code for s in p.skipped} == {SkipReason.NO_BUDGET}


def test_a_tier_already_tried_gets_no_second_floor_attempt() -> None:
    """After the primary's only attempt ate the budget: tier 1, then tier 2; then static."""
    r = _critic()
    spent = facts(elapsed_ms=15_500, tiers_tried=[0], exclude_routes=["anthropic-us-east"])
    p = plan(r, POLICY, snap(), spent, NOW)
    assert _tiers(p) == [1, 2]
    p = plan(r, POLICY, snap(), spent.model_copy(update={"tiers_tried": [0, 1]}), NOW)
    assert _tiers(p) == [2]
    p = plan(r, POLICY, snap(), spent.model_copy(update={"tiers_tried": [0, 1, 2]}), NOW)
    assert p.attempts == []


def test_the_floor_follows_the_attempts_that_still_fit() -> None:
    """5 s left: the primary gets them (its normal attempt); tiers 1 and 2, which no longer
    fit, keep one floor attempt each after it."""
    r = _critic()
    p = plan(r, POLICY, snap(), facts(elapsed_ms=10_000), NOW)
    assert _tiers(p) == [0, 1, 2]
    first, *rest = p.attempts
    assert not first.floor and first.timeout_ms == 5_000
    assert all(a.floor for a in rest)
    assert [a.worst_case_start_ms for a in rest] == [5_000, 5_000 + r.ttft_budget_ms]


def test_only_callable_routes_get_the_floor() -> None:
    """A tier whose routes are all open keeps no attempt: the floor skips no health rule."""
    r = _critic()
    open_ = [health(x, breaker=BreakerState.OPEN, open_until=NOW + 30) for x in r.roster.tier1]
    p = plan(r, POLICY, snap(*open_), facts(elapsed_ms=15_000), NOW)
    assert _tiers(p) == [0, 2]


def test_configured_floor_and_off() -> None:
    """``live_tier_floor_ms`` sets the floor (capped by the attempt timeout); 0 turns the
    guarantee off, and so does the facts' switch (runs recorded before the rule)."""
    p = plan(_critic(live_tier_floor_ms=4_000), POLICY, snap(), facts(elapsed_ms=15_000), NOW)
    assert {a.timeout_ms for a in p.attempts} == {4_000}
    assert {a.ttft_budget_ms for a in p.attempts} == {2_000}
    p = plan(_critic(live_tier_floor_ms=9_000), POLICY, snap(), facts(elapsed_ms=15_000), NOW)
    assert {a.timeout_ms for a in p.attempts} == {6_000}
    p = plan(_critic(live_tier_floor_ms=0), POLICY, snap(), facts(elapsed_ms=15_000), NOW)
    assert p.attempts == []
    p = plan(_critic(), POLICY, snap(), facts(elapsed_ms=15_000, live_tier_floor=False), NOW)
    assert p.attempts == []


def test_a_floor_larger_than_the_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="live_tier_floor_ms"):
        RolePolicy.model_validate(
            {**_critic().model_dump(exclude={"qualification"}), "live_tier_floor_ms": 20_000}
        )
