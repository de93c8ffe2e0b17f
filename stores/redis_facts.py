"""Per-route and per-role facts in Redis besides breakers and windows: SLA demotions,
shadow-evaluation samples and quality verdicts, and learned context windows.

Each write is also remembered (:class:`~stores.redis_context.SeenState`) so the local
view serves it while Redis is lost. SLA demotions and quality verdicts are kept for
:data:`~stores.redis_keys.IDLE_TTL_MS` (a week) after their last write, a quality verdict
also after its route's last shadow sample: a route's verdicts do not outlive its use.
"""

from __future__ import annotations

from dataclasses import replace

from agent_failover.resilience.config import MAX_QUALITY_SAMPLES
from agent_failover.resilience.shadow import QualitySample, QualityState
from agent_failover.stores.memory_routes import RouteFacts
from agent_failover.stores.redis_context import RedisContext
from agent_failover.stores.redis_keys import CONTEXT_WINDOW_TTL_S, IDLE_TTL_MS


def encode_verdict(regressed: bool, since: float, delta: float | None) -> str:
    """A quality verdict as stored: ``regressed|since|delta``."""
    return f"{int(regressed)}|{since!r}|{'' if delta is None else repr(delta)}"


def decode_verdict(raw: bytes | None) -> QualityState | None:
    """The stored verdict, or None if there is none."""
    if not raw:
        return None
    flag, since, delta = raw.decode().split("|")
    return QualityState(
        regressed=flag == "1", since=float(since), delta=float(delta) if delta else None
    )


class RedisFacts:
    """Write and read SLA, quality and context-window facts in Redis."""

    def __init__(self, ctx: RedisContext) -> None:
        """Work through ``ctx``; writes are remembered in its seen state."""
        self._ctx = ctx

    async def set_sla(self, role: str, route: str, demoted: bool, at: float | None) -> None:
        """Mark or clear the role's latency demotion of ``route`` (changed at ``at``)."""
        ctx = self._ctx
        seen, since = ctx.seen.sla.setdefault(role, (set(), {}))
        # The set and the times are two slots on a cluster, where MULTI cannot span them.
        async with ctx.client.pipeline(transaction=not ctx.cluster) as pipe:
            if demoted:
                pipe.sadd(ctx.keys.sla(role), route)
            else:
                pipe.srem(ctx.keys.sla(role), route)
            pipe.pexpire(ctx.keys.sla(role), IDLE_TTL_MS)
            if at is not None:
                pipe.hset(ctx.keys.sla_since(role), route, repr(at))
                pipe.pexpire(ctx.keys.sla_since(role), IDLE_TTL_MS)
            await pipe.execute()
        if demoted:
            seen.add(route)
        else:
            seen.discard(route)
        if at is not None:
            since[route] = at

    async def append_quality(self, role: str, route: str, sample: QualitySample) -> None:
        """Append one shadow sample, keeping the newest ``MAX_QUALITY_SAMPLES``."""
        ctx = self._ctx
        key = ctx.keys.quality(route, role)
        # One key, one slot; redis-py's cluster pipeline takes no MULTI, so plain there.
        async with ctx.client.pipeline(transaction=not ctx.cluster) as pipe:
            pipe.rpush(key, sample.encode())
            pipe.ltrim(key, -MAX_QUALITY_SAMPLES, -1)
            pipe.pexpire(key, ctx.ttl_ms)
            # The route's verdict lives while it is evaluated (same hash tag, same slot).
            pipe.pexpire(ctx.keys.quality_verdict(route), IDLE_TTL_MS)
            await pipe.execute()

    async def set_verdict(
        self, role: str, route: str, regressed: bool, at: float, delta: float | None
    ) -> None:
        """Write ``route``'s quality verdict for ``role``."""
        raw, key = encode_verdict(regressed, at, delta), self._ctx.keys.quality_verdict(route)
        async with self._ctx.client.pipeline(transaction=not self._ctx.cluster) as pipe:
            pipe.hset(key, role, raw)
            pipe.pexpire(key, IDLE_TTL_MS)
            await pipe.execute()
        self._ctx.seen.quality[(role, route)] = QualityState(
            regressed=regressed, since=at, delta=delta
        )

    async def quality(self, role: str, route: str) -> QualityState:
        """The route's shadow samples for ``role`` (oldest first) and its quality verdict."""
        async with self._ctx.client.pipeline(transaction=False) as pipe:
            pipe.lrange(self._ctx.keys.quality(route, role), 0, -1)
            pipe.hget(self._ctx.keys.quality_verdict(route), role)
            raw_samples, raw_verdict = await pipe.execute()
        state = decode_verdict(raw_verdict) or QualityState()
        state.samples = [QualitySample.decode(x.decode()) for x in raw_samples]
        return state

    async def learn_window(self, route: str, tokens: int) -> None:
        """Remember the context window ``route``'s provider stated."""
        key, ttl = self._ctx.keys.context_window(route), int(CONTEXT_WINDOW_TTL_S * 1000)
        await self._ctx.client.set(key, str(tokens), px=ttl)
        f = self._ctx.seen.facts.get(route, RouteFacts())
        self._ctx.seen.facts[route] = replace(f, context_window=tokens)

    async def restore_windows(self, windows: dict[str, int]) -> None:
        """Write back context windows a local view learned, unless Redis has one."""
        ttl = int(CONTEXT_WINDOW_TTL_S * 1000)
        for route, tokens in windows.items():
            # NX: a window another worker learned meanwhile is as good as ours.
            await self._ctx.client.set(
                self._ctx.keys.context_window(route), str(tokens), px=ttl, nx=True
            )
