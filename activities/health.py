"""The operator's view of the routes: the health table and forced breaker states.

``health_table`` is what the health monitor publishes each round and ``failover status``
shows: breaker states, rolling stats, the store's own health, context windows, rate-budget
levels, shadow-evaluation verdicts and tokens per dollar against each route's baseline.
``force_route`` is the operator override behind the monitor's ``force_route`` signal.
"""

from __future__ import annotations

from temporalio import activity

from agent_failover.activities.deps import ActivityDeps
from agent_failover.activities.health_models import (
    CostRow,
    ForceRouteInput,
    HealthTable,
    HealthTableInput,
    context_windows,
    cost_row,
    qualification_rows,
)
from agent_failover.activities.shadow import quality_rows
from agent_failover.resilience.breaker import Transition
from agent_failover.resilience.budget import all_scopes
from agent_failover.resilience.config import PolicyConfig
from agent_failover.stores.health import HealthStore
from agent_failover.telemetry import record


class HealthActivities:
    """``force_route`` and ``health_table`` over one worker's :class:`ActivityDeps`."""

    def __init__(self, deps: ActivityDeps) -> None:
        self._deps = deps

    @activity.defn(name="force_route")
    async def force_route(self, inp: ForceRouteInput) -> Transition:
        """Operator override: force a route open or closed, or release it."""
        self._deps.policy.endpoint(inp.route)  # unknown route → clear error before touching state
        return await self._deps.health.force(inp.route, inp.state, inp.now)

    @activity.defn(name="health_table")
    async def health_table(self, inp: HealthTableInput) -> HealthTable:
        """Breaker state and rolling stats of the given routes (all routes when empty)."""
        policy, health = self._deps.policy, self._deps.health
        routes = inp.routes or list(policy.endpoints)
        snap = await health.snapshot(
            routes, now=inp.now, window_s=inp.window_s, min_calls=1, role=None
        )
        breakers = [await health.breaker(r) for r in routes]
        for b in breakers:
            record.breaker_state(b.route, b.state.value)
        status = await health.status()
        windows = context_windows(policy, snap)
        scopes = all_scopes(policy)
        levels = await health.budget_levels(scopes, inp.now) if scopes else []
        quality = await quality_rows(health, policy, inp.now)
        cost = await cost_rows(health, policy, routes, inp.now)
        return HealthTable(
            taken_at=inp.now,
            # Recent samples are for SLA streaks, not for the status table (and this table
            # enters the monitor's history every round).
            rows=[snap.get(r).model_copy(update={"recent": []}) for r in routes],
            breakers=breakers,
            store=status.backend,
            store_namespace=status.namespace,
            store_degraded=not status.healthy,
            store_error=status.last_error,
            store_degraded_since=status.degraded_since,
            context_windows={r: windows[r] for r in routes if r in windows},
            budgets=levels,
            quality=[q for q in quality if q.route in routes],
            qualification=qualification_rows(policy),
            cost=cost,
        )


async def cost_rows(
    health: HealthStore, policy: PolicyConfig, routes: list[str], now: float
) -> list[CostRow]:
    """Each route's tokens per dollar against its baseline: every route when the policy
    demotes on it, else the routes with a billed attempt in the last 7 days."""
    rows = []
    for route in routes:
        eff = await health.cost_efficiency(route, now=now)
        seen = eff.current_attempts or eff.baseline_attempts or eff.demoted
        if seen or policy.cost_efficiency.enabled:
            rows.append(cost_row(route, eff, policy))
    return rows
