"""Recording outcomes in Redis: the aggregate buckets, the breaker decision, the baselines.

``record`` increments the outcome's buckets and reads the breaker and the two merged
breaker windows in one Lua script (``RECORD_LUA``, one round trip), lets
:mod:`resilience.breaker` decide, and persists a changed breaker with a compare-and-set on
its version (:mod:`stores.redis_breakers`); a lost race re-reads and re-decides. So no
outcome is lost (the increment is unconditional) and a transition happens once. Each
outcome carries a nonce: replayed after a Redis hiccup, it is counted once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from redis.exceptions import NoScriptError

from agent_failover.resilience.aggregates import (
    baseline_bin,
    breaker_epoch,
    breaker_stats_from,
    bucket_fields,
    encode_recent,
    hist_buckets,
    minute_buckets,
    minute_of,
    second_of,
    short_baseline_p95,
    split_fields,
    window_seconds,
)
from agent_failover.resilience.baseline import (
    LatencyBaseline,
    choose_baseline,
    completed_hours,
    feeds_baseline,
    hour_of,
    latency_bin,
    long_horizon_p95,
)
from agent_failover.resilience.breaker import Transition, on_outcome
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.cost_efficiency import cost_fields
from agent_failover.stores.memory_health import breaker_window_s
from agent_failover.stores.memory_routes import RECENT_KEPT, RouteFacts
from agent_failover.stores.redis_breakers import (
    MAX_CAS_ATTEMPTS,
    RedisBreakers,
    contention,
    parse_breaker,
)
from agent_failover.stores.redis_context import QueuedWrite, RedisContext
from agent_failover.stores.redis_keys import HOURLY_TTL_MS
from agent_failover.stores.redis_link import REDIS_DOWN
from agent_failover.stores.redis_scripts import merged_fields

_NONCE_LEN = 16


def _cost_args(outcome: CallOutcome) -> list[int]:
    """``RECORD_LUA``'s cost arguments: billed (0/1), useful tokens, nano-dollars."""
    inc = cost_fields(outcome)
    return [inc.get("b", 0), inc.get("k", 0), inc.get("n", 0)]


def new_nonce() -> str:
    """A random id for one outcome, kept across its replays."""
    return os.urandom(_NONCE_LEN // 2).hex()


@dataclass(frozen=True)
class _Windows:
    """How many buckets the breaker's windows span at ``now``."""

    n_err: int
    n_sem: int
    hists: range

    @classmethod
    def at(
        cls, now: float, settings: BreakerSettings, horizon_s: float, after: float | None = None
    ) -> _Windows:
        return cls(
            len(window_seconds(now, settings.error_window_s, horizon_s, after)),
            len(window_seconds(now, settings.semantic_window_s, horizon_s, after)),
            hist_buckets(now, settings.error_window_s, horizon_s, after),
        )

    def args(self, now: float) -> list[int]:
        """``BREAKER_READ_LUA``'s window arguments."""
        return [second_of(now), self.n_err, self.n_sem, self.hists.start, len(self.hists)]


class RedisOutcomes:
    """Count outcomes into a route's Redis aggregates and apply its breaker."""

    def __init__(self, ctx: RedisContext, breakers: RedisBreakers) -> None:
        """Write through ``ctx``; changed breakers go through ``breakers``' compare-and-set."""
        self._ctx = ctx
        self._breakers = breakers

    async def record(
        self,
        outcome: CallOutcome,
        settings: BreakerSettings,
        nonce: str,
        also: Sequence[QueuedWrite] = (),
    ) -> Transition | None:
        """Count ``outcome`` (once per ``nonce``) and apply the breaker; ``also``'s
        commands (other writes to the same server) ride in the same round trip."""
        route, now = outcome.route, outcome.at
        windows = _Windows.at(now, settings, self._ctx.horizon_s)
        args = self._record_args(outcome, windows, nonce)
        sent_at = self._ctx.seen.clock()
        raw = await self._run_record(route, args, also)
        self._remember(outcome)
        baseline = await self.baseline(route, raw[4], settings.min_calls, now)
        read = (raw[:4], sent_at)
        return await self._decide(outcome, settings, baseline.used_ms, windows, read)

    async def _run_record(self, route: str, args: list, also: Sequence[QueuedWrite]) -> list:
        """``RECORD_LUA`` alone, or pipelined with ``also``'s commands (non-transactional:
        each stands on its own), its ``EVALSHA`` queued as a plain command (no ``SCRIPT
        EXISTS`` first; the script is loaded on ``NOSCRIPT``). ``also`` learns its results,
        or that the round trip failed before they came (it then falls back on its own)."""
        record, bkey = self._ctx.scripts.record, self._ctx.keys.breaker(route)
        if not also:
            return await record(keys=[bkey], args=args)
        try:
            async with self._ctx.client.pipeline(transaction=False) as pipe:
                pipe.evalsha(record.sha, 1, bkey, *args)
                for write in also:
                    pipe.execute_command(*write.command)
                res = await pipe.execute(raise_on_error=False)
        except REDIS_DOWN as exc:
            for write in also:
                await write.failed(exc)
            raise
        for write, result in zip(also, res[1:], strict=True):
            await write.done(result)
        if isinstance(res[0], NoScriptError):
            return await record(keys=[bkey], args=args)  # loads the script, then runs it
        if isinstance(res[0], Exception):
            raise res[0]
        return res[0]

    def _record_args(self, outcome: CallOutcome, w: _Windows, nonce: str) -> list:
        """``RECORD_LUA``'s arguments, in the order its header lists them."""
        now = outcome.at
        counts, bins = split_fields(bucket_fields(outcome))
        short_bin = baseline_bin(outcome)
        return [
            self._ctx.keys.prefix(outcome.route),
            repr(now),
            self._ctx.ttl_ms,
            int(outcome.probe),
            int(outcome.ok),
            hour_of(now),
            latency_bin(outcome.latency_ms) if feeds_baseline(outcome) else "",
            HOURLY_TTL_MS,
            minute_of(now),
            "" if short_bin is None else short_bin,
            self._ctx.bucket_ttl_ms,
            encode_recent(outcome),
            RECENT_KEPT,
            second_of(now),
            w.n_err,
            w.n_sem,
            nonce,
            w.hists.start,
            len(w.hists),
            *_cost_args(outcome),
            len(counts),
            *(x for kv in counts.items() for x in kv),
            *(x for kv in bins.items() for x in kv),
        ]

    async def _decide(
        self,
        outcome: CallOutcome,
        settings: BreakerSettings,
        baseline: float | None,
        windows: _Windows,
        read: tuple[list, float],
    ) -> Transition | None:
        """Apply the breaker to the windows just read (with when that read was sent); on a
        lost race re-read and retry."""
        route, now = outcome.route, outcome.at
        bkey, prefix = self._ctx.keys.breaker(route), self._ctx.keys.prefix(route)
        breaker_read, seen = self._ctx.scripts.breaker_read, self._ctx.seen
        for _ in range(MAX_CAS_ATTEMPTS):
            (raw_b, err_w, sem_w, hist_w), sent_at = read
            current = parse_breaker(route, raw_b)
            epoch = breaker_epoch(current.state, current.since)
            if epoch is not None and epoch > now - breaker_window_s(settings):
                # Closed inside the window: only what came after counts (rare, so a
                # second read rather than the breaker's epoch in every record).
                since = _Windows.at(now, settings, self._ctx.horizon_s, epoch)
                sent_at = seen.clock()
                raw_b, err_w, sem_w, hist_w = await breaker_read(
                    keys=[bkey], args=[prefix, *since.args(now)]
                )
                current = parse_breaker(route, raw_b)
            err, sem = merged_fields(err_w) | merged_fields(hist_w), merged_fields(sem_w)
            window = sem if windows.n_sem >= windows.n_err else err
            self._ctx.seen.windows[route] = (second_of(now), window)
            stats = breaker_stats_from(err, sem, settings, baseline_p95_ms=baseline)
            new, transition = on_outcome(current, outcome, stats, settings, now)
            if new == current or await self._breakers.cas_write(bkey, current, new):
                seen.saw_breaker(route, new, sent_at)
                return transition
            sent_at = seen.clock()
            read = (await breaker_read(keys=[bkey], args=[prefix, *windows.args(now)]), sent_at)
        raise contention(route)

    def _remember(self, outcome: CallOutcome) -> None:
        """Keep the probe / last-call facts this process wrote, for the local view."""
        seen = self._ctx.seen.facts
        f = seen.get(outcome.route, RouteFacts())
        if outcome.probe:
            f = replace(f, last_probe_at=outcome.at, last_probe_ok=outcome.ok)
        elif f.last_call_at is None or outcome.at > f.last_call_at:
            f = replace(f, last_call_at=outcome.at)
        seen[outcome.route] = f

    async def baseline(
        self, route: str, raw: bytes | None, min_samples: int, now: float
    ) -> LatencyBaseline:
        """The route's baselines: ``raw`` (the cached ones) unless stale, else recomputed
        from the horizon and the hourly buckets and cached."""
        if raw:
            value, _, at = raw.decode().rpartition("|")
            if now - float(at) < self._ctx.baseline_refresh_s:
                return LatencyBaseline.model_validate_json(value)
        keys, scripts = self._ctx.keys, self._ctx.scripts
        minutes = minute_buckets(now, self._ctx.horizon_s)
        args = [keys.prefix(route), minutes.start, len(minutes)]
        summed = await scripts.sum(keys=[keys.breaker(route)], args=args)
        short_hist = {int(k): n for k, n in merged_fields(summed).items()}
        short = short_baseline_p95(short_hist, min_samples=min_samples)
        hours = list(completed_hours(now))
        flat = await scripts.hourly(keys=[keys.hour(route, h) for h in hours])
        buckets = {
            h: {int(b): n for b, n in merged_fields(f).items()}
            for h, f in zip(hours, flat, strict=True)
            if f
        }
        long, n = long_horizon_p95(buckets, now=now, min_samples=min_samples)
        baseline = choose_baseline(short, long, n)
        encoded = f"{baseline.model_dump_json()}|{now!r}"
        await self._ctx.client.set(keys.baseline(route), encoded, px=self._ctx.ttl_ms)
        return baseline
