"""The writes after an answered call (stores/after_call.py): the outcome record and the
cache write in one round trip when both stores share a Redis, each with its own fallback
when Redis is lost in that round trip, and two round trips on different servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from redis.asyncio.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.stores.after_call import AfterCallWrites, CachePut
from agent_failover.stores.cache import CachedEntry, RedisResponseCache
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.in_flight import LeaseEnd
from agent_failover.stores.redis_link import fail_fast_client
from tests.stores.conftest import FakeClock, _delete_namespace
from tests.stores.test_redis_reads import Sent

T0 = 1_700_000_000.0
ROUTE = "openai-us"
SETTINGS = BreakerSettings()


def _outcome(at: float) -> CallOutcome:
    return CallOutcome(route=ROUTE, at=at, ok=True, latency_ms=80.0, role="plain")


def _put(at: float, key: str = "k1") -> CachePut:
    return CachePut(key, CachedEntry(role="plain", content=f"answer {at}", stored_at=at), 600.0)


@dataclass
class Stores:
    health: RedisHealthStore
    cache: RedisResponseCache
    clock: FakeClock


def _with_db(url: str, db: int) -> str:
    return url.rsplit("/", 1)[0] + f"/{db}"


@pytest.fixture
async def stores(redis_url: str, namespace: str) -> AsyncIterator[Stores]:
    """A health store and a response cache on the same Redis, each its own client."""
    clock = FakeClock()
    health = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace, clock=clock)
    cache = RedisResponseCache(fail_fast_client(redis_url), namespace=namespace, clock=clock)
    try:
        yield Stores(health, cache, clock)
    finally:
        await health.close()
        await cache.close()
        await _delete_namespace(redis_url, namespace)


async def _calls(health: RedisHealthStore) -> int:
    snap = await health.snapshot([ROUTE], now=T0 + 5, window_s=60.0, min_calls=1)
    return snap.routes[ROUTE].stats.calls


async def test_record_and_cache_write_are_one_round_trip(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = AfterCallWrites(stores.health, stores.cache)
    assert writes.shared
    await writes.write(_outcome(T0), SETTINGS, _put(T0))  # connections and scripts set up
    sent = Sent(monkeypatch)
    for i in range(1, 4):
        await writes.write(_outcome(T0 + i), SETTINGS, _put(T0 + i, key=f"k{i}"))
    assert sent.count == 3
    assert await _calls(stores.health) == 4
    entry = await stores.cache.get("k3", now=T0 + 4)
    assert entry is not None and entry.content == f"answer {T0 + 3}"


async def test_the_in_flight_lease_ends_in_the_same_round_trip(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = AfterCallWrites(stores.health, stores.cache)
    await writes.write(_outcome(T0), SETTINGS, _put(T0))
    await stores.health.in_flight.start(ROUTE, "lease-1", now=T0, until=T0 + 60)
    assert await stores.health.in_flight.count(ROUTE, T0 + 1) == 1
    sent = Sent(monkeypatch)
    await writes.write(_outcome(T0 + 1), SETTINGS, _put(T0 + 1), [LeaseEnd(ROUTE, "lease-1")])
    assert sent.count == 1
    assert await stores.health.in_flight.count(ROUTE, T0 + 1) == 0


async def test_a_flushed_record_script_is_loaded_again(stores: Stores, redis_client: Any) -> None:
    """NOSCRIPT in the pipeline: the cache write stands, the record runs after a reload."""
    writes = AfterCallWrites(stores.health, stores.cache)
    await writes.write(_outcome(T0), SETTINGS, _put(T0))
    await redis_client.script_flush()
    await writes.write(_outcome(T0 + 1), SETTINGS, _put(T0 + 1, key="k2"))
    assert await _calls(stores.health) == 2
    assert await stores.cache.get("k2", now=T0 + 2) is not None


async def test_redis_lost_in_the_round_trip_keeps_each_fallback(
    stores: Stores, redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection drops after Redis ran the pipeline, before its reply: the record goes
    to the health store's local view (queued for replay), the entry to the cache's local
    fallback (queued for write-back); once Redis answers both are there, the record
    counted once (its nonce)."""
    writes = AfterCallWrites(stores.health, stores.cache)
    await writes.write(_outcome(T0), SETTINGS, _put(T0))
    real_execute = Pipeline.execute

    async def lost(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        await real_execute(self, raise_on_error)
        raise RedisConnectionError("connection lost before the reply")

    monkeypatch.setattr(Pipeline, "execute", lost)
    await writes.write(_outcome(T0 + 1), SETTINGS, _put(T0 + 1, key="k2"))
    health_status, cache_status = await stores.health.status(), await stores.cache.status()
    assert not health_status.healthy and health_status.pending_sync == 1
    assert not cache_status.healthy and cache_status.pending_sync == 1
    served = await stores.cache.get("k2", now=T0 + 2)  # from the cache's local fallback
    assert served is not None and served.content == f"answer {T0 + 1}"

    monkeypatch.setattr(Pipeline, "execute", real_execute)
    stores.clock.advance(60.0)  # past both links' reconnect interval
    assert (await stores.health.status()).healthy and (await stores.cache.status()).healthy
    other = RedisResponseCache(fail_fast_client(redis_url), namespace=namespace)
    try:
        entry = await other.get("k2", now=T0 + 2)
        assert entry is not None and entry.content == f"answer {T0 + 1}"
    finally:
        await other.close()
    assert await _calls(stores.health) == 2


async def test_a_cache_write_refused_by_redis_leaves_the_record(
    stores: Stores, redis_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An error reply to the SET (not an outage) is logged; the record stands."""
    writes = AfterCallWrites(stores.health, stores.cache)
    await writes.write(_outcome(T0), SETTINGS, _put(T0))
    cache_key = f"{stores.cache.namespace}:cache:k2"
    await redis_client.rpush(cache_key, "a list")
    queued = await stores.cache.queued_put("k2", _put(T0 + 1).entry, keep_s=600.0)
    queued.command = ("INCR", cache_key)  # a command Redis refuses on a list: WRONGTYPE
    await stores.health.record(_outcome(T0 + 1), SETTINGS, also=[queued])
    assert queued.settled
    assert "response cache write" in caplog.text
    assert (await stores.cache.status()).healthy and (await stores.health.status()).healthy
    assert await _calls(stores.health) == 2


async def test_different_servers_keep_two_round_trips(
    redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache on another server (here another database) is written on its own."""
    health = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    cache_url = _with_db(redis_url, 14 if not redis_url.endswith("/14") else 15)
    cache = RedisResponseCache(fail_fast_client(cache_url), namespace=namespace)
    try:
        writes = AfterCallWrites(health, cache)
        assert not writes.shared
        await writes.write(_outcome(T0), SETTINGS, _put(T0))
        sent = Sent(monkeypatch)
        await writes.write(_outcome(T0 + 1), SETTINGS, _put(T0 + 1, key="k2"))
        assert sent.count == 2
        assert await cache.get("k2", now=T0 + 2) is not None
    finally:
        await health.close()
        await cache.close()
        await _delete_namespace(redis_url, namespace)
        await _delete_namespace(cache_url, namespace)
