"""The writes after an answered call, in one Redis round trip when the stores share a server.

An answered attempt records its outcome in the health store (``RECORD_LUA``) and, when the
workflow asked, writes the answer to the response cache (``SET``). The two stores keep
their own clients and their own Redis-loss fallbacks; when both point at the same Redis
(the common case: one ``REDIS_URL``), :class:`AfterCallWrites` queues the cache's ``SET``
in the record's pipeline, so the two writes cost one round trip instead of two. Each keeps
its own outage semantics: the record falls back to the health store's local view and is
replayed (once, by its nonce) when Redis returns; the cache write, when the round trip
failed before it was answered, is kept in the cache's local fallback and written back the
same way as any put made while degraded. A cache write that fails for any other reason
is logged and the answer stands (a cached answer is only a fallback).

On different servers, on Redis Cluster (each store's keys hash to their own slots), with
either store degraded, or with in-memory stores, the two writes run one after the other,
exactly as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from redis.asyncio.cluster import RedisCluster

from agent_failover.resilience.breaker import Transition
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.stores.cache import CachedEntry, RedisResponseCache, ResponseCache
from agent_failover.stores.health import HealthStore, RedisHealthStore
from agent_failover.stores.redis_link import RedisLink, describe

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CachePut:
    """An answer to cache: under ``key``, kept ``keep_s`` seconds."""

    key: str
    entry: CachedEntry
    keep_s: float


def shares_server(a: RedisLink, b: RedisLink) -> bool:
    """Whether two stores' clients talk to the same Redis (not Cluster), so one pipeline
    can carry both stores' commands."""
    if isinstance(a.client, RedisCluster) or isinstance(b.client, RedisCluster):
        return False
    return describe(a.client) == describe(b.client)


class AfterCallWrites:
    """The health record and the cache write of one answered call, combined when the
    health store and the response cache share a Redis server."""

    def __init__(self, health: HealthStore, cache: ResponseCache) -> None:
        self.health = health
        self.cache = cache
        self.shared = (
            isinstance(health, RedisHealthStore)
            and isinstance(cache, RedisResponseCache)
            and shares_server(health.link, cache.link)
        )

    async def write(
        self, outcome: CallOutcome, settings: BreakerSettings, put: CachePut | None = None
    ) -> Transition | None:
        """Record ``outcome`` and cache ``put`` (if any); the breaker's transition, if any.

        A cache write that fails never fails the call; a record that fails raises, as
        :meth:`HealthStore.record` does (the cache write is then still attempted).
        """
        if put is None:
            return await self.health.record(outcome, settings)
        if not self._combinable():
            try:
                return await self.health.record(outcome, settings)
            finally:
                await cache_put(self.cache, put)
        assert isinstance(self.health, RedisHealthStore)
        assert isinstance(self.cache, RedisResponseCache)
        try:
            queued = await self.cache.queued_put(put.key, put.entry, keep_s=put.keep_s)
        except Exception as exc:  # sealing, or a bad keep_s: the same failure as a put's
            log.warning("response cache write for role %r failed: %s", put.entry.role, exc)
            return await self.health.record(outcome, settings)
        return await self.health.record(outcome, settings, also=queued)

    def _combinable(self) -> bool:
        """Both stores on one server and neither serving from its local fallback."""
        if not self.shared:
            return False
        assert isinstance(self.health, RedisHealthStore)
        assert isinstance(self.cache, RedisResponseCache)
        return not (self.health.link.degraded or self.cache.link.degraded)


async def cache_put(cache: ResponseCache, put: CachePut) -> None:
    """Write ``put`` on its own; a cache that fails must not fail an answer obtained."""
    try:
        await cache.put(put.key, put.entry, keep_s=put.keep_s)
    except Exception as exc:  # any cache fault; cancellation is not an Exception
        log.warning("response cache write for role %r failed: %s", put.entry.role, exc)
