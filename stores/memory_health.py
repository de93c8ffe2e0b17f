"""In-process health store: a rolling window, a breaker and an ``asyncio.Lock`` per route.

Used directly by unit tests and single-process runs, and by
:class:`~stores.redis_health.RedisHealthStore` as its local view while Redis is
unreachable (hence :meth:`MemoryHealthStore.load_route` to seed it with the last state
seen in Redis). Memory is bounded: each route keeps at most ``max_samples`` outcomes no
older than ``horizon_s`` behind the newest (see :class:`resilience.windows.RollingWindow`).

The slow-call threshold is relative by default (``slow_call_baseline_factor`` x the
route's baseline p95). Two baselines are kept (:mod:`resilience.baseline`): the short one
is the nearest-rank p95 of the successful calls held over the whole horizon (10 minutes by
default); the long one the p95 of hourly latency histograms of the last 7 completed days.
The long one is used when it holds ``min_calls`` samples (a gradual slowdown cannot drag
it along), else the short one, else none (relative slow-call detection is off until the
route has a history). Both are recomputed at most every ``baseline_refresh_s`` seconds.

Besides the breaker (which also carries a 429's ``cooldown_until``) each route keeps
when its last real call finished (the monitor probes only routes without traffic), the
context window its provider stated when it rejected a prompt, and per role the SLA
verdict with the time it last changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent_failover.resilience.baseline import HourlyLatency, LatencyBaseline, choose_baseline
from agent_failover.resilience.breaker import (
    Admission,
    Breaker,
    Transition,
    admit,
    force,
    on_outcome,
    release_trial,
)
from agent_failover.resilience.config import MAX_SLA_STREAK, BreakerSettings
from agent_failover.resilience.contracts import (
    BreakerState,
    CallOutcome,
    HealthSnapshot,
    RecentSample,
    RouteHealth,
)
from agent_failover.resilience.windows import (
    DEFAULT_HORIZON_S,
    DEFAULT_MAX_SAMPLES,
    RollingWindow,
    breaker_stats,
    compute_stats,
    percentile,
)
from agent_failover.stores.status import StoreStatus

DEFAULT_BASELINE_REFRESH_S = 30.0


def baseline_p95(outcomes: Iterable[CallOutcome], *, min_samples: int) -> float | None:
    """Nearest-rank p95 latency of the successful, route-attributable calls in ``outcomes``.

    Returns None with fewer than ``min_samples`` such calls: a baseline from a handful of
    samples would flag ordinary variance as slowness.
    """
    latencies = [o.latency_ms for o in outcomes if o.ok and o.counts_against_route]
    if len(latencies) < min_samples:
        return None
    return percentile(latencies, 95)


def breaker_window_s(settings: BreakerSettings) -> float:
    """The longest window the breaker reads; outcomes older than this cannot change it."""
    return max(settings.error_window_s, settings.semantic_window_s)


def recent_samples(outcomes: Iterable[CallOutcome], *, now: float) -> list[RecentSample]:
    """The newest :data:`MAX_SLA_STREAK` observations up to ``now`` that count against the
    route, oldest first (what the SLA streaks read)."""
    counted = sorted(
        (o for o in outcomes if o.counts_against_route and o.at <= now), key=lambda o: o.at
    )
    return [
        RecentSample(at=o.at, latency_ms=o.latency_ms, ok=o.ok) for o in counted[-MAX_SLA_STREAK:]
    ]


@dataclass(frozen=True)
class RouteFacts:
    """The per-route facts a snapshot reports besides the breaker and the window."""

    last_probe_at: float | None = None
    last_probe_ok: bool | None = None
    last_call_at: float | None = None
    context_window: int | None = None


def route_health(
    route: str,
    breaker: Breaker,
    outcomes: Iterable[CallOutcome],
    *,
    now: float,
    window_s: float,
    min_calls: int,
    sla: tuple[bool, float | None],
    facts: RouteFacts,
    recent: list[RecentSample],
) -> RouteHealth:
    """Assemble one route's :class:`RouteHealth` from its persisted parts.

    ``sla`` is the role's (demoted, since) for the route; ``recent`` the newest
    observations (see :func:`recent_samples`).
    """
    return RouteHealth(
        route=route,
        breaker=breaker.state,
        open_until=breaker.open_until,
        breaker_reason=breaker.reason.value if breaker.reason is not None else None,
        stats=compute_stats(outcomes, now=now, window_s=window_s, min_calls=min_calls),
        sla_demoted=sla[0],
        sla_since=sla[1],
        last_probe_at=facts.last_probe_at,
        last_probe_ok=facts.last_probe_ok,
        cooldown_until=breaker.cooldown_until,
        last_call_at=facts.last_call_at,
        context_window=facts.context_window,
        recent=recent,
    )


@dataclass
class _Route:
    """Everything the memory store holds for one route."""

    breaker: Breaker
    window: RollingWindow
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_probe_at: float | None = None
    last_probe_ok: bool | None = None
    last_call_at: float | None = None
    context_window: int | None = None
    hourly: HourlyLatency = field(default_factory=HourlyLatency)
    baseline: LatencyBaseline | None = None
    baseline_at: float | None = None

    def facts(self) -> RouteFacts:
        return RouteFacts(
            self.last_probe_at, self.last_probe_ok, self.last_call_at, self.context_window
        )


class MemoryHealthStore:
    """A :class:`~stores.health.HealthStore` in process memory."""

    backend = "memory"

    def __init__(
        self,
        *,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        horizon_s: float = DEFAULT_HORIZON_S,
        baseline_refresh_s: float = DEFAULT_BASELINE_REFRESH_S,
    ) -> None:
        """Create an empty store; each route keeps ``max_samples`` outcomes of ``horizon_s``."""
        self.max_samples = max_samples
        self.horizon_s = horizon_s
        self.baseline_refresh_s = baseline_refresh_s
        self._routes: dict[str, _Route] = {}
        self._sla: dict[str, set[str]] = {}
        self._sla_since: dict[str, dict[str, float]] = {}

    def _route(self, route: str) -> _Route:
        r = self._routes.get(route)
        if r is None:
            r = _Route(
                breaker=Breaker(route=route),
                window=RollingWindow(max_samples=self.max_samples, horizon_s=self.horizon_s),
            )
            self._routes[route] = r
        return r

    def _baseline(self, r: _Route, min_samples: int, now: float) -> LatencyBaseline:
        if (
            r.baseline is None
            or r.baseline_at is None
            or now - r.baseline_at >= self.baseline_refresh_s
        ):
            held = r.window.outcomes(now=now, window_s=self.horizon_s)
            short = baseline_p95(held, min_samples=min_samples)
            long, n = r.hourly.p95(now=now, min_samples=min_samples)
            r.baseline, r.baseline_at = choose_baseline(short, long, n), now
        return r.baseline

    async def record(self, outcome: CallOutcome, settings: BreakerSettings) -> Transition | None:
        """Append ``outcome`` and apply the breaker under the route's lock."""
        r = self._route(outcome.route)
        async with r.lock:
            r.window.add(outcome)
            r.hourly.add(outcome)
            if outcome.probe:
                r.last_probe_at, r.last_probe_ok = outcome.at, outcome.ok
            elif r.last_call_at is None or outcome.at > r.last_call_at:
                r.last_call_at = outcome.at
            now = outcome.at
            recent = r.window.outcomes(now=now, window_s=breaker_window_s(settings))
            baseline = self._baseline(r, settings.min_calls, now).used_ms
            stats = breaker_stats(recent, settings, now=now, baseline_p95_ms=baseline)
            r.breaker, transition = on_outcome(r.breaker, outcome, stats, settings, now)
            return transition

    async def admit(self, route: str, settings: BreakerSettings, now: float) -> Admission:
        """Ask the breaker; trial slots are taken under the route's lock."""
        r = self._route(route)
        async with r.lock:
            r.breaker, admission, _ = admit(r.breaker, settings, now)
            return admission

    async def release_trial(self, route: str, now: float) -> None:
        """Give back a trial slot."""
        r = self._route(route)
        async with r.lock:
            r.breaker = release_trial(r.breaker, now)

    async def force(self, route: str, target: BreakerState | None, now: float) -> Transition:
        """Force or release the breaker; raises ``IllegalTransition`` for rejected moves."""
        r = self._route(route)
        async with r.lock:
            r.breaker, transition = force(r.breaker, target, now)
            return transition

    async def breaker(self, route: str) -> Breaker:
        """Return the route's breaker (CLOSED if never seen)."""
        r = self._routes.get(route)
        return r.breaker if r is not None else Breaker(route=route)

    async def snapshot(
        self,
        routes: Sequence[str],
        *,
        now: float,
        window_s: float,
        min_calls: int,
        role: str | None = None,
    ) -> HealthSnapshot:
        """Read every route in ``routes``; unseen routes appear CLOSED with empty stats."""
        demoted = self._sla.get(role, set()) if role is not None else set()
        since = self._sla_since.get(role, {}) if role is not None else {}
        out: dict[str, RouteHealth] = {}
        for name in routes:
            r = self._routes.get(name)
            held = r.window.outcomes(now=now, window_s=self.horizon_s) if r else []
            out[name] = route_health(
                name,
                r.breaker if r else Breaker(route=name),
                [o for o in held if o.at >= now - window_s],
                now=now,
                window_s=window_s,
                min_calls=min_calls,
                sla=(name in demoted, since.get(name)),
                facts=r.facts() if r else RouteFacts(),
                recent=recent_samples(held, now=now),
            )
        return HealthSnapshot(taken_at=now, routes=out)

    async def set_sla_demoted(
        self, role: str, route: str, demoted: bool, *, at: float | None = None
    ) -> None:
        """Mark or clear the role's latency demotion of ``route`` (changed at ``at``)."""
        if demoted:
            self._sla.setdefault(role, set()).add(route)
        else:
            self._sla.get(role, set()).discard(route)
        if at is not None:
            self._sla_since.setdefault(role, {})[route] = at

    async def learn_context_window(self, route: str, tokens: int, now: float) -> None:
        """Remember the window ``route``'s provider stated (the latest statement wins)."""
        del now  # kept for the protocol: the Redis store stamps it
        self._route(route).context_window = tokens

    async def latency_baseline(
        self, route: str, *, now: float, min_samples: int
    ) -> LatencyBaseline:
        """The route's short and long-horizon baselines and the one slow calls compare to."""
        r = self._route(route)
        async with r.lock:
            r.baseline_at = None  # a read is always fresh
            return self._baseline(r, min_samples, now)

    async def status(self) -> StoreStatus:
        """An in-memory store is always healthy."""
        return StoreStatus(backend=self.backend, healthy=True)

    async def close(self) -> None:
        """Drop all state."""
        self._routes.clear()
        self._sla.clear()
        self._sla_since.clear()

    # --- seeding and inspection, used by the Redis store's fallback view -----------------

    def load_route(
        self,
        route: str,
        *,
        breaker: Breaker | None = None,
        outcomes: Iterable[CallOutcome] = (),
        facts: RouteFacts | None = None,
    ) -> None:
        """Seed one route's state (e.g. the last state read from Redis), replacing any held."""
        r = self._route(route)
        if breaker is not None:
            r.breaker = breaker
        for o in sorted(outcomes, key=lambda o: o.at):
            r.window.add(o)
        if facts is not None:
            if facts.last_probe_at is not None:
                r.last_probe_at, r.last_probe_ok = facts.last_probe_at, facts.last_probe_ok
            r.last_call_at = facts.last_call_at or r.last_call_at
            r.context_window = facts.context_window or r.context_window

    def load_sla(
        self, role: str, demoted_routes: Iterable[str], since: dict[str, float] | None = None
    ) -> None:
        """Seed the set of routes demoted for ``role`` and when each verdict changed."""
        self._sla[role] = set(demoted_routes)
        self._sla_since[role] = dict(since or {})

    def context_windows(self) -> dict[str, int]:
        """Every learned context window held, by route."""
        return {n: r.context_window for n, r in self._routes.items() if r.context_window}

    def breakers(self) -> dict[str, Breaker]:
        """Every breaker held, by route."""
        return {name: r.breaker for name, r in self._routes.items()}

    def window_len(self, route: str) -> int:
        """How many outcomes the route's window holds (0 if unseen)."""
        r = self._routes.get(route)
        return len(r.window) if r else 0
