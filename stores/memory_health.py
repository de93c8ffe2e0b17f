"""In-process health store: running aggregates, a breaker and an ``asyncio.Lock`` per route.

Used directly by unit tests and single-process runs, and by
:class:`~stores.redis_health.RedisHealthStore` as its local view while Redis is
unreachable (hence its public :attr:`~MemoryHealthStore.routes` and
:attr:`~MemoryHealthStore.roles`, seeded with the last state seen in Redis). The per-route
aggregates live in :mod:`stores.memory_routes`: no outcome is kept, so recording and a
snapshot cost the same at 1 or 1000 calls a second.

The slow-call threshold is relative by default (``slow_call_baseline_factor`` x the
route's baseline p95). Two baselines are kept (:mod:`resilience.baseline`): the short one
is the p95 of the successful calls over the horizon (10 minutes by default), read from
per-minute histograms; the long one the p95 of hourly latency histograms of the last 7
completed days. The long one is used when it holds ``min_calls`` samples (a gradual
slowdown cannot drag it along), else the short one, else none (relative slow-call
detection is off until the route has a history). Both are recomputed at most every
``baseline_refresh_s`` seconds.

Besides the breaker (which also carries a 429's ``cooldown_until``) each route keeps
when its last real call finished (the monitor probes only routes without traffic), the
context window its provider stated when it rejected a prompt, the newest observations
(the SLA streaks), per role the SLA verdict with the time it last changed, and per role the
shadow-evaluation samples and quality verdict (:mod:`resilience.shadow`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent_failover.resilience.admission import Admission, admit, admit_probe
from agent_failover.resilience.aggregates import (
    Fields,
    breaker_epoch,
    breaker_stats_from,
    decode_recent,
    role_latency_stats,
    stats_from_fields,
)
from agent_failover.resilience.baseline import LatencyBaseline
from agent_failover.resilience.breaker import (
    DEFAULT_TRIAL_HOLD_S,
    Breaker,
    Transition,
    force,
    on_outcome,
    release_trial,
)
from agent_failover.resilience.budget import BucketLevel, Scope
from agent_failover.resilience.config import MAX_QUALITY_SAMPLES, MAX_SLA_STREAK, BreakerSettings
from agent_failover.resilience.contracts import (
    BreakerState,
    CallOutcome,
    CostEfficiency,
    HealthSnapshot,
    RecentSample,
    RouteHealth,
)
from agent_failover.resilience.cost_efficiency import CostLedger
from agent_failover.resilience.shadow import QualitySample, QualityState
from agent_failover.resilience.windows import DEFAULT_HORIZON_S
from agent_failover.stores.budgets import BudgetBuckets, BudgetGrant, MemoryBudgets
from agent_failover.stores.in_flight import LeaseTake, MemoryInFlight
from agent_failover.stores.memory_routes import RouteFacts, RouteTable
from agent_failover.stores.status import StoreStatus

DEFAULT_BASELINE_REFRESH_S = 30.0


def new_lease_id() -> str:
    """A fresh half-open trial lease id (unique across workers)."""
    return uuid.uuid4().hex[:16]


def breaker_window_s(settings: BreakerSettings) -> float:
    """The longest window the breaker reads; outcomes older than this cannot change it."""
    return max(settings.error_window_s, settings.semantic_window_s)


def route_health(
    route: str,
    breaker: Breaker,
    window: Fields,
    *,
    window_s: float,
    min_calls: int,
    sla: tuple[bool, float | None],
    facts: RouteFacts,
    recent: list[RecentSample],
    quality: QualityState | None = None,
    role: str | None = None,
) -> RouteHealth:
    """Assemble one route's :class:`RouteHealth` from its persisted parts.

    ``window`` is the merged aggregate of the snapshot's window; ``sla`` the role's
    (demoted, since) for the route; ``recent`` the newest observations.
    """
    return RouteHealth(
        route=route,
        breaker=breaker.state,
        open_until=breaker.open_until,
        breaker_reason=breaker.reason.value if breaker.reason is not None else None,
        stats=stats_from_fields(window, window_s=window_s, min_calls=min_calls),
        role_stats=None if role is None else role_latency_stats(window, role, window_s=window_s),
        sla_demoted=sla[0],
        sla_since=sla[1],
        last_probe_at=facts.last_probe_at,
        last_probe_ok=facts.last_probe_ok,
        cooldown_until=breaker.cooldown_until,
        last_call_at=facts.last_call_at,
        context_window=facts.context_window,
        recent=recent,
        quality_regressed=quality.regressed if quality else False,
        quality_since=quality.since if quality else None,
    )


@dataclass
class RoleVerdicts:
    """Per role: the latency-demoted routes, when each SLA verdict changed, and each
    route's shadow samples and quality verdict."""

    sla: dict[str, set[str]] = field(default_factory=dict)
    sla_since: dict[str, dict[str, float]] = field(default_factory=dict)
    quality: dict[tuple[str, str], QualityState] = field(default_factory=dict)

    def load_sla(
        self, role: str, demoted_routes: Iterable[str], since: dict[str, float] | None = None
    ) -> None:
        """Seed the set of routes demoted for ``role`` and when each verdict changed."""
        self.sla[role] = set(demoted_routes)
        self.sla_since[role] = dict(since or {})

    def load_quality(self, role: str, route: str, state: QualityState) -> None:
        """Seed one route's quality verdict (and samples) for ``role``."""
        self.quality[(role, route)] = state.model_copy(deep=True)

    def clear(self) -> None:
        """Forget every verdict."""
        self.sla.clear()
        self.sla_since.clear()
        self.quality.clear()


class MemoryHealthStore:
    """A :class:`~stores.health.HealthStore` in process memory."""

    backend = "memory"

    def __init__(
        self,
        *,
        horizon_s: float = DEFAULT_HORIZON_S,
        baseline_refresh_s: float = DEFAULT_BASELINE_REFRESH_S,
    ) -> None:
        """Create an empty store; each route keeps ``horizon_s`` seconds of aggregates."""
        if horizon_s <= 0:
            raise ValueError(f"horizon_s must be > 0, got {horizon_s}")
        self.horizon_s = horizon_s
        self.baseline_refresh_s = baseline_refresh_s
        self.routes = RouteTable(horizon_s=horizon_s)
        self.roles = RoleVerdicts()
        self._budgets = BudgetBuckets(MemoryBudgets())
        #: The user calls in flight on each route (the health monitor does not probe them).
        self.in_flight = MemoryInFlight()

    async def record(self, outcome: CallOutcome, settings: BreakerSettings) -> Transition | None:
        """Append ``outcome`` and apply the breaker under the route's lock."""
        r = self.routes.get(outcome.route)
        async with r.lock:
            r.agg.add(outcome)
            r.hourly.add(outcome)
            if r.cost is not None:
                r.cost.add(outcome)
            if outcome.probe:
                r.last_probe_at, r.last_probe_ok = outcome.at, outcome.ok
            elif r.last_call_at is None or outcome.at > r.last_call_at:
                r.last_call_at = outcome.at
            now = outcome.at
            baseline = r.baseline_for(settings.min_calls, now, self.baseline_refresh_s).used_ms
            epoch = breaker_epoch(r.breaker.state, r.breaker.since)
            stats = breaker_stats_from(
                r.agg.window(now, settings.error_window_s, epoch),
                r.agg.window(now, settings.semantic_window_s, epoch),
                settings,
                baseline_p95_ms=baseline,
            )
            r.breaker, transition = on_outcome(r.breaker, outcome, stats, settings, now)
            return transition

    async def admit(
        self,
        route: str,
        settings: BreakerSettings,
        now: float,
        *,
        hold_s: float | None = None,
        probe: bool = False,
    ) -> Admission:
        """Ask the breaker, under the route's lock: a call's trial slot is leased for
        ``hold_s`` plus the grace; a probe (``probe``) never takes or waits for one."""
        r = self.routes.get(route)
        hold = DEFAULT_TRIAL_HOLD_S if hold_s is None else hold_s
        async with r.lock:
            if probe:
                r.breaker, admission, _ = admit_probe(r.breaker, now)
            else:
                r.breaker, admission, _ = admit(
                    r.breaker, settings, now, hold_s=hold, lease_id=new_lease_id()
                )
            return admission

    async def release_trial(self, route: str, now: float, lease: str | None = None) -> None:
        """Give back a trial slot's lease (None: the first to expire)."""
        r = self.routes.get(route)
        async with r.lock:
            r.breaker = release_trial(r.breaker, now, lease)

    async def force(self, route: str, target: BreakerState | None, now: float) -> Transition:
        """Force or release the breaker; raises ``IllegalTransition`` for rejected moves."""
        r = self.routes.get(route)
        async with r.lock:
            r.breaker, transition = force(r.breaker, target, now)
            return transition

    async def breaker(self, route: str) -> Breaker:
        """Return the route's breaker (CLOSED if never seen)."""
        r = self.routes.find(route)
        return r.breaker if r is not None else Breaker(route=route)

    async def snapshot(
        self,
        routes: Sequence[str],
        *,
        now: float,
        window_s: float,
        min_calls: int,
        role: str | None = None,
        lease: LeaseTake | None = None,
    ) -> HealthSnapshot:
        """Read every route in ``routes``; unseen routes appear CLOSED with empty stats.
        ``lease``: an in-flight lease taken with the read."""
        if lease is not None:
            await self.in_flight.start(lease.route, lease.lease, now=now, until=lease.until)
        demoted = self.roles.sla.get(role, set()) if role is not None else set()
        since = self.roles.sla_since.get(role, {}) if role is not None else {}
        out: dict[str, RouteHealth] = {}
        for name in routes:
            r = self.routes.find(name)
            out[name] = route_health(
                name,
                r.breaker if r else Breaker(route=name),
                r.agg.window(now, window_s) if r else {},
                window_s=window_s,
                min_calls=min_calls,
                sla=(name in demoted, since.get(name)),
                facts=r.facts() if r else RouteFacts(),
                recent=(
                    decode_recent(r.agg.recent, now=now, keep=MAX_SLA_STREAK, role=role)
                    if r
                    else []
                ),
                quality=self.roles.quality.get((role, name)) if role is not None else None,
                role=role,
            )
        return HealthSnapshot(taken_at=now, routes=out)

    async def set_sla_demoted(
        self, role: str, route: str, demoted: bool, *, at: float | None = None
    ) -> None:
        """Mark or clear the role's latency demotion of ``route`` (changed at ``at``)."""
        if demoted:
            self.roles.sla.setdefault(role, set()).add(route)
        else:
            self.roles.sla.get(role, set()).discard(route)
        if at is not None:
            self.roles.sla_since.setdefault(role, {})[route] = at

    async def record_quality(self, role: str, route: str, sample: QualitySample) -> None:
        """Append one shadow sample of ``route`` for ``role`` (the newest
        ``MAX_QUALITY_SAMPLES`` are kept)."""
        state = self.roles.quality.setdefault((role, route), QualityState())
        state.samples = [*state.samples, sample][-MAX_QUALITY_SAMPLES:]

    async def quality(self, role: str, route: str) -> QualityState:
        """The route's shadow samples for ``role`` (oldest first) and its quality verdict."""
        state = self.roles.quality.get((role, route))
        return state.model_copy(deep=True) if state else QualityState()

    async def set_quality_regressed(
        self, role: str, route: str, regressed: bool, *, at: float, delta: float | None = None
    ) -> None:
        """Mark or clear ``route`` as quality-regressed for ``role`` (changed at ``at``)."""
        state = self.roles.quality.setdefault((role, route), QualityState())
        state.regressed, state.since, state.delta = regressed, at, delta

    async def learn_context_window(self, route: str, tokens: int, now: float) -> None:
        """Remember the window ``route``'s provider stated (the latest statement wins)."""
        del now  # kept for the protocol: the Redis store stamps it
        self.routes.get(route).context_window = tokens

    async def latency_baseline(
        self, route: str, *, now: float, min_samples: int
    ) -> LatencyBaseline:
        """The route's short and long-horizon baselines and the one slow calls compare to."""
        r = self.routes.get(route)
        async with r.lock:
            r.baseline_at = None  # a read is always fresh
            return r.baseline_for(min_samples, now, self.baseline_refresh_s)

    async def cost_efficiency(self, route: str, *, now: float) -> CostEfficiency:
        """The route's useful tokens and spend, current window and 7-day baseline."""
        r = self.routes.find(route)
        if r is None or r.cost is None:
            return CostLedger(self.horizon_s).efficiency(now)
        return r.cost.efficiency(now)

    async def set_cost_demoted(self, route: str, demoted: bool, *, at: float) -> None:
        """Mark or clear ``route``'s cost-efficiency demotion (changed at ``at``)."""
        r = self.routes.get(route)
        if r.cost is None:
            r.cost = CostLedger(self.horizon_s)
        r.cost.demoted, r.cost.since = demoted, at

    # --- rate budgets (stores.budgets) ------------------------------------------------

    async def take_budget(
        self, scopes: Sequence[Scope], tokens: int, *, critical: bool, now: float
    ) -> BudgetGrant:
        """Reserve one request and ``tokens`` from every scope, or nothing."""
        return await self._budgets.take(scopes, tokens, critical=critical, now=now)

    async def settle_budget(self, grant: BudgetGrant, actual_tokens: int, now: float) -> None:
        """Charge (or give back) the difference between the reservation and the usage."""
        await self._budgets.settle(grant, actual_tokens, now)

    async def budget_levels(self, scopes: Sequence[Scope], now: float) -> list[BucketLevel]:
        """Every bucket of ``scopes`` refilled to ``now``."""
        return await self._budgets.levels(scopes, now)

    async def status(self) -> StoreStatus:
        """An in-memory store is always healthy."""
        return StoreStatus(backend=self.backend, healthy=True)

    async def close(self) -> None:
        """Drop all state."""
        self.routes.clear()
        self.roles.sla.clear()
        self.roles.sla_since.clear()
        self.roles.quality.clear()
