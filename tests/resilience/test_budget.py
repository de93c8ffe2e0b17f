"""Rate budgets as pure values: token-bucket arithmetic, policy validation, the planner's
RATE_BUDGET skip (planned like a cool-down), reserves for critical roles, refill with ``now``."""

from __future__ import annotations

import copy

import pytest
import yaml

from agent_failover.config.loader import load_policy, parse_policy
from agent_failover.resilience.budget import (
    Bucket,
    BucketLevel,
    BucketState,
    BudgetUnit,
    Take,
    all_scopes,
    refill,
    scopes_for,
    settle,
    take,
)
from agent_failover.resilience.config import PolicyError
from agent_failover.resilience.contracts import HealthSnapshot, RouteHealth
from agent_failover.resilience.plan import RequestFacts, SkipReason
from agent_failover.resilience.planner import plan
from tests.resilience.conftest import DEMO_POLICY

NOW = 1_000_000.0
REQ = Bucket(unit=BudgetUnit.REQUESTS, capacity=60.0)


def budgeted_policy(**budgets: object):
    """The demo policy with ``rate_budgets`` set."""
    data = yaml.safe_load(DEMO_POLICY.read_text())
    data["rate_budgets"] = budgets
    return parse_policy(data, env={})


def test_refill_is_linear_and_capped() -> None:
    """A bucket refills capacity/60 per second, never above capacity, never backwards."""
    s = BucketState(level=0.0, at=NOW)
    assert refill(REQ, s, NOW + 10).level == pytest.approx(10.0)
    assert refill(REQ, s, NOW + 600).level == 60.0
    assert refill(REQ, s, NOW - 5) == s
    assert refill(REQ, None, NOW) == BucketState(level=60.0, at=NOW)


def test_take_is_all_or_none_and_names_the_wait() -> None:
    """One short bucket refuses the whole take; the wait is the slowest bucket's."""
    tok = Bucket(unit=BudgetUnit.TOKENS, capacity=600.0)
    states = [BucketState(level=30.0, at=NOW), BucketState(level=100.0, at=NOW)]
    res = take(
        [Take(bucket=REQ, cost=1), Take(bucket=tok, cost=300)], states, critical=False, now=NOW
    )
    assert not res.granted
    assert res.wait_s == pytest.approx(200 / 10)  # 200 tokens short at 10 per second
    assert [s.level for s in res.states] == [30.0, 100.0]


def test_reserve_binds_only_ordinary_roles() -> None:
    """A non-critical take must leave the reserve; a critical one may use it."""
    b = Bucket(unit=BudgetUnit.REQUESTS, capacity=10.0, reserve=3.0)
    s = [BucketState(level=3.5, at=NOW)]
    assert not take([Take(bucket=b, cost=1)], s, critical=False, now=NOW).granted
    assert take([Take(bucket=b, cost=1)], s, critical=True, now=NOW).granted


def test_settle_goes_into_debt_and_caps_refunds() -> None:
    """Usage above the estimate is charged below zero; a refund never overfills."""
    tok = Bucket(unit=BudgetUnit.TOKENS, capacity=100.0)
    assert settle(tok, BucketState(level=10.0, at=NOW), 50, NOW).level == -40.0
    assert settle(tok, BucketState(level=90.0, at=NOW), -50, NOW).level == 100.0


def test_policy_validation_names_the_field() -> None:
    """Unknown endpoints or bulkheads and a budget without a limit fail with their paths."""
    data = yaml.safe_load(DEMO_POLICY.read_text())
    data["rate_budgets"] = {
        "endpoints": {"nope": {"requests_per_minute": 1}},
        "bulkheads": {"ghost": {"tokens_per_minute": 1}},
    }
    with pytest.raises(PolicyError) as info:
        parse_policy(copy.deepcopy(data), env={})
    paths = {p for p, _ in info.value.errors}
    assert {"rate_budgets.endpoints.nope", "rate_budgets.bulkheads.ghost"} <= paths
    data["rate_budgets"] = {"endpoints": {"anthropic-us-east": {"reserve": 0.1}}}
    with pytest.raises(PolicyError, match="requests_per_minute"):
        parse_policy(data, env={})


def test_scopes_and_subset() -> None:
    """A call draws from its endpoint and its role's bulkhead; the role subset keeps both."""
    pol = budgeted_policy(
        endpoints={"anthropic-us-east": {"requests_per_minute": 100, "tokens_per_minute": 9000}},
        bulkheads={"specialists": {"requests_per_minute": 30, "reserve": 0.2}},
    )
    names = [s.name for s in scopes_for(pol, "researcher", "anthropic-us-east")]
    assert names == ["endpoint:anthropic-us-east", "bulkhead:specialists"]
    assert [s.name for s in scopes_for(pol, "planner", "anthropic-us-east")] == [
        "endpoint:anthropic-us-east"
    ]
    sub = pol.checked_subset_for("planner")
    assert list(sub.rate_budgets.endpoints) == ["anthropic-us-east"]
    assert sub.rate_budgets.bulkheads == {}
    assert [s.name for s in all_scopes(pol)][-1] == "bulkhead:specialists"
    assert scopes_for(pol, "researcher", "anthropic-us-east")[1].buckets[0].reserve == 6.0


def _empty_primary(policy, role: str, level: float, at: float = NOW) -> HealthSnapshot:
    primary = policy.routes_for(role)[0]
    levels = [
        BucketLevel(scope=s.name, bucket=b, level=level, at=at)
        for s in scopes_for(policy, role, primary)
        for b in s.buckets
    ]
    return HealthSnapshot(
        taken_at=NOW, routes={primary: RouteHealth(route=primary, budgets=levels)}
    )


def test_out_of_budget_route_is_planned_like_a_cooling_route() -> None:
    """An exhausted primary is skipped with RATE_BUDGET; the plan starts on the standby."""
    pol = budgeted_policy(endpoints={"anthropic-us-east": {"requests_per_minute": 60}})
    facts = RequestFacts(input_tokens=100, max_output_tokens=100)
    p = plan(pol.role("researcher"), pol, _empty_primary(pol, "researcher", 0.2), facts, NOW)
    primary = pol.routes_for("researcher")[0]
    assert primary not in [a.route for a in p.attempts]
    skip = next(s for s in p.skipped if s.route == primary)
    assert skip.code is SkipReason.RATE_BUDGET
    assert "endpoint:anthropic-us-east requests" in skip.reason
    # One request a second refills it: 0.8 s later the primary leads the plan again.
    later = plan(
        pol.role("researcher"), pol, _empty_primary(pol, "researcher", 0.2), facts, NOW + 0.8
    )
    assert later.attempts[0].route == primary


def test_token_budget_counts_the_request_size() -> None:
    """A token bucket that holds a small request but not a large one skips only the large."""
    pol = budgeted_policy(endpoints={"anthropic-us-east": {"tokens_per_minute": 10_000}})
    snap = _empty_primary(pol, "researcher", 3000)
    primary = pol.routes_for("researcher")[0]
    small = plan(
        pol.role("researcher"),
        pol,
        snap,
        RequestFacts(input_tokens=1000, max_output_tokens=500),
        NOW,
    )
    big = plan(
        pol.role("researcher"),
        pol,
        snap,
        RequestFacts(input_tokens=4000, max_output_tokens=500),
        NOW,
    )
    assert small.attempts[0].route == primary
    assert primary in [s.route for s in big.skipped if s.code is SkipReason.RATE_BUDGET]


def test_reserve_keeps_the_primary_for_critical_roles() -> None:
    """In the reserve, an ordinary role fails over while a critical role keeps the primary."""
    pol = budgeted_policy(
        endpoints={"anthropic-us-east": {"requests_per_minute": 100, "reserve": 0.2}}
    )
    facts = RequestFacts(input_tokens=100, max_output_tokens=100)
    primary = pol.routes_for("planner")[0]
    assert pol.role("planner").critical and not pol.role("researcher").critical
    ordinary = plan(pol.role("researcher"), pol, _empty_primary(pol, "researcher", 15), facts, NOW)
    critical = plan(pol.role("planner"), pol, _empty_primary(pol, "planner", 15), facts, NOW)
    assert ordinary.attempts[0].route != primary
    assert critical.attempts[0].route == primary


def test_demo_policy_has_no_budgets() -> None:
    """Budgets are opt-in: the demo policy plans exactly as before."""
    pol = load_policy(DEMO_POLICY, env={})
    assert not pol.rate_budgets.limited()
    assert scopes_for(pol, "researcher", pol.routes_for("researcher")[0]) == []
