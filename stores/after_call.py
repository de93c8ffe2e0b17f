"""The writes after an answered call, in one Redis round trip when the stores share a server.

An answered attempt records its outcome in the health store (``RECORD_LUA``), gives back
its in-flight lease (``ZREM``, with the role context's lease when the attempt did not use
it; on the health store's own server: it always rides along while Redis answers; if that
round trip is lost the lease lapses by itself) and, when the workflow asked, writes the
answer to the response cache (``SET``). The two stores keep their own clients and their
own Redis-loss fallbacks; when both point at the same Redis (the common case: one
``REDIS_URL``), :class:`AfterCallWrites` queues the cache's ``SET`` in the record's
pipeline, so the two writes cost one round trip instead of two. Each keeps
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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

from redis.asyncio.cluster import RedisCluster

from agent_failover.resilience.breaker import Transition
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.stores.cache import CachedEntry, RedisResponseCache, ResponseCache
from agent_failover.stores.health import HealthStore, RedisHealthStore
from agent_failover.stores.in_flight import InFlight, LeaseEnd
from agent_failover.stores.redis_context import QueuedWrite
from agent_failover.stores.redis_in_flight import RedisInFlight
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
    """The health record, the cache write and the in-flight lease's end of one answered
    call, in one round trip where they share a Redis server."""

    def __init__(self, health: HealthStore, cache: ResponseCache) -> None:
        self.health = health
        self.cache = cache
        self.shared = (
            isinstance(health, RedisHealthStore)
            and isinstance(cache, RedisResponseCache)
            and shares_server(health.link, cache.link)
        )

    async def write(
        self,
        outcome: CallOutcome,
        settings: BreakerSettings,
        put: CachePut | None = None,
        ends: Sequence[LeaseEnd] = (),
    ) -> Transition | None:
        """Record ``outcome``, cache ``put`` (if given) and give back the leases ``ends``
        (the attempt's own, and its role context's when it was not the attempt's); the
        breaker's transition, if any.

        A cache write or a lease's end that fails never fails the call (logged; a lease
        lapses by itself); a record that fails raises, as :meth:`HealthStore.record` does
        (the others are then still attempted).
        """
        riders: list[QueuedWrite] = []
        alone: list[Callable[[], Awaitable[None]]] = []
        if put is not None:
            await self._put(put, riders, alone)
        for end in ends:
            self._end(end, riders, alone)
        try:
            if riders:
                assert isinstance(self.health, RedisHealthStore)
                return await self.health.record(outcome, settings, also=riders)
            return await self.health.record(outcome, settings)
        finally:
            for write in alone:
                await write()

    def _on_redis(self) -> bool:
        """Whether the health store is Redis and not serving from its local view."""
        return isinstance(self.health, RedisHealthStore) and not self.health.link.degraded

    async def _put(
        self, put: CachePut, riders: list[QueuedWrite], alone: list[Callable[[], Awaitable[None]]]
    ) -> None:
        """The cache write as a rider when the cache shares the health store's server."""
        if not (self.shared and self._on_redis()):
            alone.append(partial(cache_put, self.cache, put))
            return
        assert isinstance(self.cache, RedisResponseCache)
        if self.cache.link.degraded:
            alone.append(partial(cache_put, self.cache, put))
            return
        try:
            riders.append(await self.cache.queued_put(put.key, put.entry, keep_s=put.keep_s))
        except Exception as exc:  # sealing, or a bad keep_s: the same failure as a put's
            log.warning("response cache write for role %r failed: %s", put.entry.role, exc)

    def _end(
        self, end: LeaseEnd, riders: list[QueuedWrite], alone: list[Callable[[], Awaitable[None]]]
    ) -> None:
        """The lease's end as a rider (its key lives on the health store's own server)."""
        leases = self.health.in_flight
        if self._on_redis() and isinstance(leases, RedisInFlight):
            riders.append(leases.queued_end(end.route, end.lease))
        else:
            alone.append(partial(end_lease, leases, end))


async def cache_put(cache: ResponseCache, put: CachePut) -> None:
    """Write ``put`` on its own; a cache that fails must not fail an answer obtained."""
    try:
        await cache.put(put.key, put.entry, keep_s=put.keep_s)
    except Exception as exc:  # any cache fault; cancellation is not an Exception
        log.warning("response cache write for role %r failed: %s", put.entry.role, exc)


async def end_lease(leases: InFlight, end: LeaseEnd) -> None:
    """Give ``end`` back on its own; a store fault is logged (the lease lapses by itself)."""
    try:
        await leases.end(end.route, end.lease)
    except Exception as exc:  # any store fault; the lease expires on its own
        log.warning("in-flight lease on %r not given back: %s", end.route, exc)
