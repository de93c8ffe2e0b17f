"""Reading the health store from Redis: every route of a snapshot in one round trip.

Each route is one ``READ_LUA`` call (breaker, probe and call facts, context window, the
newest observations and the snapshot's window merged server-side); with a role, the role's
SLA set and times and each route's quality verdict follow in the same pipeline, and so does
the call's in-flight lease on its first route when the role context takes one
(:class:`~stores.redis_in_flight.QueuedTake`). What is read is remembered
(:class:`~stores.redis_context.SeenState`) for the local view.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from redis.exceptions import NoScriptError

from agent_failover.resilience.aggregates import (
    decode_recent,
    hist_buckets,
    second_of,
    window_seconds,
)
from agent_failover.resilience.breaker import Breaker
from agent_failover.resilience.config import MAX_SLA_STREAK
from agent_failover.resilience.contracts import HealthSnapshot, RouteHealth
from agent_failover.resilience.shadow import QualityState
from agent_failover.stores.memory_health import route_health
from agent_failover.stores.memory_routes import RECENT_KEPT, RouteFacts
from agent_failover.stores.redis_breakers import parse_breaker
from agent_failover.stores.redis_context import RedisContext
from agent_failover.stores.redis_facts import decode_verdict
from agent_failover.stores.redis_in_flight import QueuedTake
from agent_failover.stores.redis_scripts import merged_fields, reload_script


def _float(raw: bytes | None) -> float | None:
    return float(raw) if raw is not None else None


@dataclass(frozen=True)
class RouteRead:
    """One route as ``READ_LUA`` returns it, parsed."""

    breaker: Breaker
    window: dict[str, int]
    facts: RouteFacts
    recent: list[str]

    @classmethod
    def parse(cls, route: str, raw: list) -> RouteRead:
        """Parse ``READ_LUA``'s reply for ``route``."""
        raw_b, p_at, p_ok, c_at, cw, recent, counts, hists = raw
        entries = recent.decode().split(";") if recent else []
        facts = RouteFacts(
            last_probe_at=_float(p_at),
            last_probe_ok=bool(int(p_ok)) if p_ok is not None else None,
            last_call_at=_float(c_at),
            context_window=int(cw) if cw is not None else None,
        )
        window = merged_fields(counts) | merged_fields(hists)
        return cls(parse_breaker(route, raw_b), window, facts, entries)


@dataclass(frozen=True)
class _RoleRead:
    """A role's SLA set and times and the routes' quality verdicts, as read."""

    demoted: set[str]
    since: dict[str, float]
    quality: dict[str, QualityState]


class RedisSnapshots:
    """Health snapshots read from Redis."""

    def __init__(self, ctx: RedisContext) -> None:
        """Read through ``ctx``; what is read is remembered in its seen state."""
        self._ctx = ctx

    async def snapshot(
        self,
        routes: Sequence[str],
        *,
        now: float,
        window_s: float,
        min_calls: int,
        role: str | None,
        take: QueuedTake | None = None,
    ) -> HealthSnapshot:
        """Read all ``routes`` (and ``role``'s verdicts on them) in one round trip, with
        ``take`` (an in-flight lease) in it when given."""
        sent_at = self._ctx.seen.clock()
        res = await self._read_routes(routes, now=now, window_s=window_s, role=role, take=take)
        if take is not None:
            res = res[:-1]  # the take's reply (its errors raise, as the reads' do)
        verdicts = self._role_read(routes, role, res[len(routes) :])
        seen = self._ctx.seen
        out: dict[str, RouteHealth] = {}
        for route, raw in zip(routes, res, strict=False):
            read = RouteRead.parse(route, raw)
            seen.saw_breaker(route, read.breaker, sent_at)
            seen.windows[route] = (second_of(now), read.window)
            seen.recent[route] = read.recent
            seen.facts[route] = read.facts
            out[route] = route_health(
                route,
                read.breaker,
                read.window,
                window_s=window_s,
                min_calls=min_calls,
                sla=(route in verdicts.demoted, verdicts.since.get(route)),
                facts=read.facts,
                recent=decode_recent(read.recent, now=now, keep=MAX_SLA_STREAK, role=role),
                quality=verdicts.quality.get(route),
                role=role,
            )
        return HealthSnapshot(taken_at=now, routes=out)

    def _role_read(self, routes: Sequence[str], role: str | None, res: list) -> _RoleRead:
        """Parse (and remember) the role's part of the reply: SLA set, times, verdicts."""
        if role is None:
            return _RoleRead(set(), {}, {})
        demoted = {m.decode() for m in res[0]}
        since = {k.decode(): float(v) for k, v in res[1].items()}
        self._ctx.seen.sla[role] = (demoted, since)
        quality: dict[str, QualityState] = {}
        for route, raw_q in zip(routes, res[2:], strict=True):
            if (state := decode_verdict(raw_q)) is not None:
                quality[route] = self._ctx.seen.quality[(role, route)] = state
        return _RoleRead(demoted, since, quality)

    async def _read_routes(
        self,
        routes: Sequence[str],
        *,
        now: float,
        window_s: float,
        role: str | None,
        take: QueuedTake | None,
    ) -> list:
        """``READ_LUA`` per route, then the role's SLA set and times and each route's
        quality verdict for the role, in one round trip.

        On Redis Cluster scripts cannot be pipelined (redis-py blocks it): the per-route
        reads run concurrently instead, each sent to its route's slot.
        """
        ctx, keys, read = self._ctx, self._ctx.keys, self._ctx.scripts.read
        n = len(window_seconds(now, window_s, ctx.horizon_s))
        hists = hist_buckets(now, window_s, ctx.horizon_s)

        def args(route: str) -> list:
            return [keys.prefix(route), second_of(now), n, RECENT_KEPT, hists.start, len(hists)]

        if ctx.cluster:
            reads = [read(keys=[keys.breaker(r)], args=args(r)) for r in routes]
            if role is not None:
                reads += [ctx.client.smembers(keys.sla(role))]
                reads += [ctx.client.hgetall(keys.sla_since(role))]
                reads += [ctx.client.hget(keys.quality_verdict(r), role) for r in routes]
            if take is not None:
                reads += [take.alone()]
            return list(await asyncio.gather(*reads))
        try:
            return await self._pipelined_read(routes, role, args, take)
        except NoScriptError:
            # A restarted or flushed server: load the scripts once, read again (taking a
            # lease twice is one lease: the same member, the same score).
            await reload_script(read)
            if take is not None:
                await take.load()
            return await self._pipelined_read(routes, role, args, take)

    async def _pipelined_read(
        self,
        routes: Sequence[str],
        role: str | None,
        args: Callable[[str], list],
        take: QueuedTake | None,
    ) -> list:
        """One pipeline: ``EVALSHA`` of ``READ_LUA`` per route and the role's reads.

        The script's ``EVALSHA`` is queued as a plain command: a registered script queued
        on a pipeline makes redis-py send ``SCRIPT EXISTS`` first, a second round trip on
        every snapshot (the caller loads the script on ``NOSCRIPT`` instead).
        """
        ctx, keys, read = self._ctx, self._ctx.keys, self._ctx.scripts.read
        async with ctx.client.pipeline(transaction=False) as pipe:
            for route in routes:
                pipe.evalsha(read.sha, 1, keys.breaker(route), *args(route))
            if role is not None:
                pipe.smembers(keys.sla(role))
                pipe.hgetall(keys.sla_since(role))
                for route in routes:
                    pipe.hget(keys.quality_verdict(route), role)
            if take is not None:
                take.queue(pipe)
            return await pipe.execute()
