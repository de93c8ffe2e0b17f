"""The operator's view of the routes: the health table and forced breaker states.

``health_table`` is what the health monitor publishes each round and ``failover status``
shows: breaker states, rolling stats, the store's own health, context windows, rate-budget
levels and shadow-evaluation verdicts. ``force_route`` is the operator override behind
the monitor's ``force_route`` signal.
"""

from __future__ import annotations

from temporalio import activity

from agent_failover.activities.deps import ActivityDeps
from agent_failover.activities.health_models import (
    ForceRouteInput,
    HealthTable,
    HealthTableInput,
    context_windows,
    qualification_rows,
)
from agent_failover.activities.shadow import quality_rows
from agent_failover.resilience.breaker import Transition
from agent_failover.resilience.budget import all_scopes
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
        return HealthTable(
            taken_at=inp.now,
            # Recent samples are for SLA streaks, not for the status table (and this table
            # enters the monitor's history every round).
            rows=[snap.get(r).model_copy(update={"recent": []}) for r in routes],
            breakers=breakers,
            store=status.backend,
            store_degraded=not status.healthy,
            store_error=status.last_error,
            store_degraded_since=status.degraded_since,
            context_windows={r: windows[r] for r in routes if r in windows},
            budgets=levels,
            quality=[q for q in quality if q.route in routes],
            qualification=qualification_rows(policy),
        )
