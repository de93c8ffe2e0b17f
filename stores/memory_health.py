"""In-process health store: running aggregates, a breaker and an ``asyncio.Lock`` per route.

Used directly by unit tests and single-process runs, and by
:class:`~stores.redis_health.RedisHealthStore` as its local view while Redis is
unreachable (hence :meth:`MemoryHealthStore.load_route` to seed it with the last state
seen in Redis). No outcome is kept: each one increments the counters and histogram bins
of the second it finished in (:mod:`resilience.aggregates`), exactly as the Redis store's
Lua script does, so recording and a snapshot cost the same at 1 or 1000 calls a second and
memory is bounded by the horizon (``horizon_s`` seconds of buckets, a few dozen counters
each).

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

import asyncio
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent_failover.resilience.aggregates import (
    Fields,
    baseline_bin,
    breaker_epoch,
    breaker_stats_from,
    bucket_fields,
    decode_recent,
    encode_recent,
    hist_bucket_of,
    hist_buckets,
    merge_fields,
    minute_buckets,
    minute_of,
    second_of,
    short_baseline_p95,
    split_fields,
    stats_from_fields,
    window_seconds,
)
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
from agent_failover.resilience.budget import BucketLevel, Scope
from agent_failover.resilience.config import MAX_QUALITY_SAMPLES, MAX_SLA_STREAK, BreakerSettings
from agent_failover.resilience.contracts import (
    BreakerState,
    CallOutcome,
    HealthSnapshot,
    RecentSample,
    RouteHealth,
)
from agent_failover.resilience.shadow import QualitySample, QualityState
from agent_failover.resilience.windows import DEFAULT_HORIZON_S
from agent_failover.stores.budgets import BudgetBuckets, BudgetGrant, MemoryBudgets
from agent_failover.stores.status import StoreStatus

DEFAULT_BASELINE_REFRESH_S = 30.0
#: Newest observations kept per route: twice what the SLA streaks read, since entries
#: newer than a snapshot's ``now`` are filtered out.
RECENT_KEPT = 2 * MAX_SLA_STREAK


def breaker_window_s(settings: BreakerSettings) -> float:
    """The longest window the breaker reads; outcomes older than this cannot change it."""
    return max(settings.error_window_s, settings.semantic_window_s)


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
    window: Fields,
    *,
    window_s: float,
    min_calls: int,
    sla: tuple[bool, float | None],
    facts: RouteFacts,
    recent: list[RecentSample],
    quality: QualityState | None = None,
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
class _Aggregates:
    """One route's per-second buckets, per-minute baseline histograms and newest samples."""

    horizon_s: float
    seconds: dict[int, dict[str, int]] = field(default_factory=dict)
    hists: dict[int, dict[str, int]] = field(default_factory=dict)
    minutes: dict[int, dict[int, int]] = field(default_factory=dict)
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_KEPT))
    newest: float = float("-inf")
    oldest_second: int | None = None

    def add(self, outcome: CallOutcome) -> None:
        """Count ``outcome`` in its buckets and drop the buckets behind the horizon."""
        self.newest = max(self.newest, outcome.at)
        cutoff = second_of(self.newest - self.horizon_s)
        sec = second_of(outcome.at)
        inc = bucket_fields(outcome)
        if inc and sec >= cutoff:
            counts, hist = split_fields(inc)
            self.add_bucket(sec, counts)
            h = self.hists.setdefault(hist_bucket_of(outcome.at), {})
            for k, n in hist.items():
                h[k] = h.get(k, 0) + n
        b = baseline_bin(outcome)
        if b is not None and sec >= cutoff:
            m = self.minutes.setdefault(minute_of(outcome.at), {})
            m[b] = m.get(b, 0) + 1
        if entry := encode_recent(outcome):
            self.recent.append(entry)
        self._prune(cutoff)

    def add_bucket(self, sec: int, inc: Fields) -> None:
        """Add counters to the second's bucket (a seeded window may carry bins too)."""
        bucket = self.seconds.setdefault(sec, {})
        for k, n in inc.items():
            bucket[k] = bucket.get(k, 0) + n
        if self.oldest_second is None or sec < self.oldest_second:
            self.oldest_second = sec

    def _prune(self, cutoff: int) -> None:
        # Walk second by second while the gap is short; after a long idle gap rebuild.
        if self.oldest_second is None or self.oldest_second >= cutoff:
            return
        if cutoff - self.oldest_second > len(self.seconds):
            self.seconds = {s: b for s, b in self.seconds.items() if s >= cutoff}
        else:
            for s in range(self.oldest_second, cutoff):
                self.seconds.pop(s, None)
        self.oldest_second = min(self.seconds, default=None)
        first_hist = hist_bucket_of(cutoff)
        if self.hists and min(self.hists) < first_hist:
            self.hists = {b: h for b, h in self.hists.items() if b >= first_hist}
        first_minute = minute_of(cutoff)
        if self.minutes and min(self.minutes) < first_minute:
            self.minutes = {m: h for m, h in self.minutes.items() if m >= first_minute}

    def window(self, now: float, window_s: float, after: float | None = None) -> dict[str, int]:
        """The merged buckets of the window of ``window_s`` ending at ``now`` (after ``after``)."""
        secs = window_seconds(now, window_s, self.horizon_s, after)
        counts = merge_fields(self.seconds[s] for s in secs if s in self.seconds)
        hists = hist_buckets(now, window_s, self.horizon_s, after)
        return merge_fields((counts, *(self.hists[b] for b in hists if b in self.hists)))

    def short_histogram(self, now: float) -> dict[int, int]:
        """Successful-call latency bins over the horizon (the short baseline)."""
        total: dict[int, int] = {}
        for m in minute_buckets(now, self.horizon_s):
            for b, n in self.minutes.get(m, {}).items():
                total[b] = total.get(b, 0) + n
        return total


@dataclass
class _Route:
    """Everything the memory store holds for one route."""

    breaker: Breaker
    agg: _Aggregates
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
        horizon_s: float = DEFAULT_HORIZON_S,
        baseline_refresh_s: float = DEFAULT_BASELINE_REFRESH_S,
    ) -> None:
        """Create an empty store; each route keeps ``horizon_s`` seconds of aggregates."""
        if horizon_s <= 0:
            raise ValueError(f"horizon_s must be > 0, got {horizon_s}")
        self.horizon_s = horizon_s
        self.baseline_refresh_s = baseline_refresh_s
        self._routes: dict[str, _Route] = {}
        self._sla: dict[str, set[str]] = {}
        self._sla_since: dict[str, dict[str, float]] = {}
        self._budgets = BudgetBuckets(MemoryBudgets())
        self._quality: dict[tuple[str, str], QualityState] = {}

    def _route(self, route: str) -> _Route:
        r = self._routes.get(route)
        if r is None:
            r = _Route(
                breaker=Breaker(route=route),
                agg=_Aggregates(horizon_s=self.horizon_s),
            )
            self._routes[route] = r
        return r

    def _baseline(self, r: _Route, min_samples: int, now: float) -> LatencyBaseline:
        if (
            r.baseline is None
            or r.baseline_at is None
            or now - r.baseline_at >= self.baseline_refresh_s
        ):
            short = short_baseline_p95(r.agg.short_histogram(now), min_samples=min_samples)
            long, n = r.hourly.p95(now=now, min_samples=min_samples)
            r.baseline, r.baseline_at = choose_baseline(short, long, n), now
        return r.baseline

    async def record(self, outcome: CallOutcome, settings: BreakerSettings) -> Transition | None:
        """Append ``outcome`` and apply the breaker under the route's lock."""
        r = self._route(outcome.route)
        async with r.lock:
            r.agg.add(outcome)
            r.hourly.add(outcome)
            if outcome.probe:
                r.last_probe_at, r.last_probe_ok = outcome.at, outcome.ok
            elif r.last_call_at is None or outcome.at > r.last_call_at:
                r.last_call_at = outcome.at
            now = outcome.at
            baseline = self._baseline(r, settings.min_calls, now).used_ms
            epoch = breaker_epoch(r.breaker.state, r.breaker.since)
            stats = breaker_stats_from(
                r.agg.window(now, settings.error_window_s, epoch),
                r.agg.window(now, settings.semantic_window_s, epoch),
                settings,
                baseline_p95_ms=baseline,
            )
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
            out[name] = route_health(
                name,
                r.breaker if r else Breaker(route=name),
                r.agg.window(now, window_s) if r else {},
                window_s=window_s,
                min_calls=min_calls,
                sla=(name in demoted, since.get(name)),
                facts=r.facts() if r else RouteFacts(),
                recent=(decode_recent(r.agg.recent, now=now, keep=MAX_SLA_STREAK) if r else []),
                quality=self._quality.get((role, name)) if role is not None else None,
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

    async def record_quality(self, role: str, route: str, sample: QualitySample) -> None:
        """Append one shadow sample of ``route`` for ``role`` (the newest
        ``MAX_QUALITY_SAMPLES`` are kept)."""
        state = self._quality.setdefault((role, route), QualityState())
        state.samples = [*state.samples, sample][-MAX_QUALITY_SAMPLES:]

    async def quality(self, role: str, route: str) -> QualityState:
        """The route's shadow samples for ``role`` (oldest first) and its quality verdict."""
        state = self._quality.get((role, route))
        return state.model_copy(deep=True) if state else QualityState()

    async def set_quality_regressed(
        self, role: str, route: str, regressed: bool, *, at: float, delta: float | None = None
    ) -> None:
        """Mark or clear ``route`` as quality-regressed for ``role`` (changed at ``at``)."""
        state = self._quality.setdefault((role, route), QualityState())
        state.regressed, state.since, state.delta = regressed, at, delta

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
        self._routes.clear()
        self._sla.clear()
        self._sla_since.clear()
        self._quality.clear()

    # --- seeding and inspection, used by the Redis store's fallback view -----------------

    def load_route(
        self,
        route: str,
        *,
        breaker: Breaker | None = None,
        window: tuple[int, Fields] | None = None,
        recent: Iterable[str] = (),
        facts: RouteFacts | None = None,
    ) -> None:
        """Seed one route's state (e.g. the last state read from Redis).

        ``window`` is a merged window as (second, fields): the Redis store keeps only the
        merged sums it read, so they are seeded as one bucket at the second of the read.
        ``recent`` are encoded newest observations (:func:`resilience.aggregates.encode_recent`).
        """
        r = self._route(route)
        if breaker is not None:
            r.breaker = breaker
        if window is not None and window[1]:
            r.agg.add_bucket(*window)
            r.agg.newest = max(r.agg.newest, float(window[0]))
        for e in recent:
            r.agg.recent.append(e)
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

    def load_quality(self, role: str, route: str, state: QualityState) -> None:
        """Seed one route's quality verdict (and samples) for ``role``."""
        self._quality[(role, route)] = state.model_copy(deep=True)

    def context_windows(self) -> dict[str, int]:
        """Every learned context window held, by route."""
        return {n: r.context_window for n, r in self._routes.items() if r.context_window}

    def breakers(self) -> dict[str, Breaker]:
        """Every breaker held, by route."""
        return {name: r.breaker for name, r in self._routes.items()}

    def bucket_count(self, route: str) -> int:
        """How many per-second buckets the route holds (0 if unseen); bounded by the horizon."""
        r = self._routes.get(route)
        return len(r.agg.seconds) if r else 0
