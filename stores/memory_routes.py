"""One process's per-route state: aggregates, breaker and facts, and the table of routes.

:class:`Aggregates` keeps no outcome: each one increments the counters and histogram bins
of the second it finished in (:mod:`resilience.aggregates`), exactly as the Redis store's
Lua script does, so recording and a snapshot cost the same at 1 or 1000 calls a second
and memory is bounded by the horizon (``horizon_s`` seconds of buckets, a few dozen
counters each). :class:`RouteTable` creates routes on first use and is where the Redis
store's fallback view is seeded with the last state read from Redis.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from agent_failover.resilience.aggregates import (
    Fields,
    baseline_bin,
    bucket_fields,
    encode_recent,
    hist_bucket_of,
    hist_buckets,
    merge_fields,
    minute_buckets,
    minute_of,
    second_of,
    short_baseline_p95,
    split_fields,
    window_seconds,
)
from agent_failover.resilience.baseline import HourlyLatency, LatencyBaseline, choose_baseline
from agent_failover.resilience.breaker import Breaker
from agent_failover.resilience.config import MAX_SLA_STREAK
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.cost_efficiency import CostLedger

#: Newest observations kept per route: twice what the SLA streaks read, since entries
#: newer than a snapshot's ``now`` are filtered out.
RECENT_KEPT = 2 * MAX_SLA_STREAK


@dataclass(frozen=True)
class RouteFacts:
    """The per-route facts a snapshot reports besides the breaker and the window."""

    last_probe_at: float | None = None
    last_probe_ok: bool | None = None
    last_call_at: float | None = None
    context_window: int | None = None


@dataclass
class Aggregates:
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
class RouteState:
    """Everything the memory store holds for one route."""

    breaker: Breaker
    agg: Aggregates
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_probe_at: float | None = None
    last_probe_ok: bool | None = None
    last_call_at: float | None = None
    context_window: int | None = None
    hourly: HourlyLatency = field(default_factory=HourlyLatency)
    baseline: LatencyBaseline | None = None
    baseline_at: float | None = None
    cost: CostLedger | None = None

    def facts(self) -> RouteFacts:
        return RouteFacts(
            self.last_probe_at, self.last_probe_ok, self.last_call_at, self.context_window
        )

    def baseline_for(self, min_samples: int, now: float, refresh_s: float) -> LatencyBaseline:
        """The route's baselines, recomputed when older than ``refresh_s``."""
        if self.baseline is None or self.baseline_at is None or now - self.baseline_at >= refresh_s:
            short = short_baseline_p95(self.agg.short_histogram(now), min_samples=min_samples)
            long, n = self.hourly.p95(now=now, min_samples=min_samples)
            self.baseline, self.baseline_at = choose_baseline(short, long, n), now
        return self.baseline


@dataclass
class RouteTable:
    """Every route's state by name, each created on first use."""

    horizon_s: float
    routes: dict[str, RouteState] = field(default_factory=dict)

    def get(self, route: str) -> RouteState:
        """The route's state, created (CLOSED, empty) if unseen."""
        r = self.routes.get(route)
        if r is None:
            r = RouteState(
                breaker=Breaker(route=route),
                agg=Aggregates(horizon_s=self.horizon_s),
                cost=CostLedger(self.horizon_s),
            )
            self.routes[route] = r
        return r

    def find(self, route: str) -> RouteState | None:
        """The route's state, or None if unseen (a read does not create it)."""
        return self.routes.get(route)

    def load(
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
        r = self.get(route)
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

    def clear(self) -> None:
        """Forget every route."""
        self.routes.clear()

    def context_windows(self) -> dict[str, int]:
        """Every learned context window held, by route."""
        return {n: r.context_window for n, r in self.routes.items() if r.context_window}

    def breakers(self) -> dict[str, Breaker]:
        """Every breaker held, by route."""
        return {name: r.breaker for name, r in self.routes.items()}

    def bucket_count(self, route: str) -> int:
        """How many per-second buckets the route holds (0 if unseen); bounded by the horizon."""
        r = self.routes.get(route)
        return len(r.agg.seconds) if r else 0
