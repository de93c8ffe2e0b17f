"""Backend-specific cache behaviour: LRU bound in memory, key TTL and Redis loss in Redis."""

from __future__ import annotations

import asyncio

from agent_failover.stores.cache import CachedEntry, MemoryResponseCache, RedisResponseCache
from agent_failover.stores.embedded_redis import EmbeddedRedis
from agent_failover.stores.redis_link import fail_fast_client

T0 = 1_700_000_000.0


def entry(content: str = "answer", at: float = T0) -> CachedEntry:
    """A critic answer stored at ``at``."""
    return CachedEntry(role="critic", content=content, stored_at=at)


async def test_memory_lru_evicts_least_recently_used() -> None:
    """Past max_entries the least recently *read or written* entry goes first."""
    cache = MemoryResponseCache(max_entries=3)
    for k in "abc":
        await cache.put(k, entry(k), keep_s=60)
    assert await cache.get("a", now=T0) is not None  # a is now most recent
    await cache.put("d", entry("d"), keep_s=60)
    assert len(cache) == 3
    assert await cache.get("b", now=T0) is None
    assert [await cache.get(k, now=T0) is not None for k in "acd"] == [True] * 3


async def test_redis_key_has_ttl_and_namespace(redis_client, namespace: str) -> None:
    """Entries are stored under the namespace with a Redis TTL matching keep_s."""
    cache = RedisResponseCache(redis_client, namespace=namespace)
    await cache.put("k", entry(), keep_s=30)
    pttl = await redis_client.pttl(f"{namespace}:cache:k")
    assert 0 < pttl <= 30_000
    other = RedisResponseCache(redis_client, namespace=namespace + "-other")
    assert await other.get("k", now=T0) is None


async def test_redis_cache_survives_redis_loss(embedded_redis: EmbeddedRedis, fake_clock) -> None:
    """Redis dies: the cache uses memory and degrades; Redis returns: entries written back."""
    cache = RedisResponseCache(
        fail_fast_client(embedded_redis.url),
        namespace="cache-lost",
        reconnect_interval_s=5.0,
        clock=fake_clock,
    )
    try:
        await asyncio.to_thread(embedded_redis.kill)
        await cache.put("k", entry("during outage"), keep_s=600)
        got = await cache.get("k", now=T0 + 1)
        assert got is not None and got.content == "during outage"
        status = await cache.status()
        assert not status.healthy and status.pending_sync == 1

        await asyncio.to_thread(embedded_redis.start)
        fake_clock.advance(5.0)
        status = await cache.status()
        assert status.healthy and status.pending_sync == 0
        check = fail_fast_client(embedded_redis.url)
        try:
            assert await check.exists("cache-lost:cache:k") == 1
        finally:
            await check.aclose()
        got = await cache.get("k", now=T0 + 2)
        assert got is not None and got.content == "during outage"
    finally:
        await cache.close()
