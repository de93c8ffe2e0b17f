"""`role_context` judges a role's SLA on that role's own calls on a route (plus probes),
not on every role's calls there."""

from __future__ import annotations

import httpx

from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import RoleContextInput
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore

T0 = 1_000_000.0
ROUTE = "anthropic-us-east"  # tier 0 of both the shipped planner and synthesis


async def test_fast_planner_is_not_demoted_by_slow_synthesis_on_the_same_route() -> None:
    """900 ms planner calls beside 9 s synthesis calls on one route: the planner (SLA p95
    4 s) keeps the route, synthesis (SLA p95 8 s) has it demoted (before: the route-wide
    p95 of 9 s demoted it for the planner too)."""
    policy = load_policy(DEFAULT_POLICY_PATH, env={"SIM_URL": "http://sim.test"})
    assert ROUTE in policy.role("planner").roster.tier0
    assert ROUTE in policy.role("synthesis").roster.tier0
    health = MemoryHealthStore()
    acts = LLMActivitySet(
        policy, httpx.AsyncClient(), health, MemoryResponseCache(), task_queue_for=lambda r: "q"
    )
    settings = policy.breaker_for(ROUTE)
    for i in range(20):
        for role, latency in (("planner", 900.0), ("synthesis", 9000.0)):
            outcome = CallOutcome(route=ROUTE, at=T0 + i, ok=True, latency_ms=latency, role=role)
            await health.record(outcome, settings)
    now = T0 + 21
    planner = await acts.context.role_context(RoleContextInput(role="planner", now=now))
    synthesis = await acts.context.role_context(RoleContextInput(role="synthesis", now=now))
    assert not planner.snapshot.get(ROUTE).sla_demoted
    assert synthesis.snapshot.get(ROUTE).sla_demoted
    persisted = await health.snapshot([ROUTE], now=now, window_s=60, min_calls=10, role="planner")
    assert not persisted.get(ROUTE).sla_demoted
