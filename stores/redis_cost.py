"""Reading a route's cost efficiency from Redis, and persisting its verdict.

The counters are written by ``RECORD_LUA`` with the outcome (once per nonce): per minute
``NS:h:{route}:cm:<minute>`` and per hour ``NS:h:{route}:ch:<hour>``, each ``b k n``
(:mod:`resilience.cost_efficiency`). A read sums the current window's minutes server-side;
the baseline (the completed hours of the last 7 days) only changes when the hour turns,
so it is summed once per hour and cached in ``NS:h:{route}:cb`` as ``hour|b,k,n``.
"""

from __future__ import annotations

from agent_failover.resilience.aggregates import minute_buckets
from agent_failover.resilience.baseline import completed_hours, hour_of
from agent_failover.resilience.contracts import CostEfficiency
from agent_failover.resilience.cost_efficiency import efficiency_from, sum_fields
from agent_failover.stores.redis_context import RedisContext
from agent_failover.stores.redis_keys import HOURLY_TTL_MS
from agent_failover.stores.redis_scripts import merged_fields


class RedisCost:
    """The cost-efficiency reads and the verdict writes of the Redis health store."""

    def __init__(self, ctx: RedisContext) -> None:
        self._ctx = ctx

    async def efficiency(self, route: str, now: float) -> CostEfficiency:
        """The route's current window and baseline sums at ``now``, and its verdict."""
        keys, scripts = self._ctx.keys, self._ctx.scripts
        minutes = minute_buckets(now, self._ctx.horizon_s)
        prefix = keys.prefix(route)
        current, cached, verdict = await scripts.cost_read(
            keys=[keys.breaker(route)], args=[prefix, minutes.start, len(minutes)]
        )
        hour = hour_of(now)
        baseline = _cached_baseline(cached, hour)
        if baseline is None:
            hours = list(completed_hours(now))
            flat = await scripts.hourly(keys=[f"{prefix}ch:{h}" for h in hours])
            baseline = sum_fields(merged_fields(f) for f in flat)
            encoded = ",".join(f"{k}={n}" for k, n in sorted(baseline.items()))
            await self._ctx.client.set(f"{prefix}cb", f"{hour}|{encoded}", px=self._ctx.ttl_ms)
        return efficiency_from(
            merged_fields(current),
            baseline,
            now=now,
            window_s=self._ctx.horizon_s,
            verdict=_verdict(verdict),
        )

    async def set_verdict(self, route: str, demoted: bool, at: float) -> None:
        """Persist the route's cost-efficiency verdict for every worker (7 days, like the
        hourly counters it was judged on)."""
        key = f"{self._ctx.keys.prefix(route)}cv"
        await self._ctx.client.set(key, f"{int(demoted)}|{at!r}", px=HOURLY_TTL_MS)


def _cached_baseline(raw: bytes | None, hour: int) -> dict[str, int] | None:
    if not raw:
        return None
    at, _, fields = raw.decode().partition("|")
    return merged_fields(fields.encode()) if int(at) == hour else None


def _verdict(raw: bytes | None) -> tuple[bool, float | None]:
    if not raw:
        return False, None
    demoted, _, since = raw.decode().partition("|")
    return demoted == "1", float(since)
