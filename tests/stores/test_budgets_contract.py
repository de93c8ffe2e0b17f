"""The rate-budget contract, run against the memory store and real Redis (identical results).

Token buckets refill with the injected ``now``; a scope's buckets are taken all or none;
a refusal in a later scope gives back what earlier scopes granted; reserves hold for
critical roles; settlement charges or gives back the difference to the estimate.
"""

from __future__ import annotations

import asyncio

import pytest

from agent_failover.resilience.budget import Bucket, BudgetUnit, Scope
from agent_failover.stores.health import HealthStore, RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client

T0 = 1_700_000_000.0


def scope(name: str = "endpoint:a", rpm: float | None = 10, tpm: float | None = None, reserve=0.0):
    buckets = []
    if rpm is not None:
        buckets.append(Bucket(unit=BudgetUnit.REQUESTS, capacity=rpm, reserve=rpm * reserve))
    if tpm is not None:
        buckets.append(Bucket(unit=BudgetUnit.TOKENS, capacity=tpm, reserve=tpm * reserve))
    return Scope(name=name, buckets=buckets)


async def levels(store: HealthStore, s: Scope, now: float) -> dict[str, float]:
    return {lv.bucket.unit.value: lv.level for lv in await store.budget_levels([s], now)}


async def test_fresh_bucket_is_full_and_drains(health_store: HealthStore) -> None:
    """A never-used budget grants its capacity, then refuses with the refill wait."""
    s = scope(rpm=3)
    assert await levels(health_store, s, T0) == {"requests": 3.0}
    for _ in range(3):
        assert (await health_store.take_budget([s], 0, critical=False, now=T0)).granted
    refused = await health_store.take_budget([s], 0, critical=False, now=T0)
    assert not refused.granted
    assert refused.refused_by == "endpoint:a"
    # 3 per minute: one request every 20 s.
    assert refused.wait_s == pytest.approx(20.0)


async def test_refill_over_time(health_store: HealthStore) -> None:
    """The bucket refills at capacity/60 per second of injected time, capped at capacity."""
    s = scope(rpm=60)
    for _ in range(60):
        assert (await health_store.take_budget([s], 0, critical=False, now=T0)).granted
    assert not (await health_store.take_budget([s], 0, critical=False, now=T0 + 0.5)).granted
    assert (await health_store.take_budget([s], 0, critical=False, now=T0 + 1.0)).granted
    assert await levels(health_store, s, T0 + 1.0) == {"requests": pytest.approx(0.0)}
    assert await levels(health_store, s, T0 + 3600) == {"requests": 60.0}


async def test_scope_buckets_are_all_or_none(health_store: HealthStore) -> None:
    """A token shortfall refuses the call without spending its request."""
    s = scope(rpm=10, tpm=1000)
    assert (await health_store.take_budget([s], 800, critical=False, now=T0)).granted
    refused = await health_store.take_budget([s], 800, critical=False, now=T0)
    assert not refused.granted
    # 600 tokens short at 1000/60 per second.
    assert refused.wait_s == pytest.approx(600 / (1000 / 60))
    assert await levels(health_store, s, T0) == {"requests": 9.0, "tokens": 200.0}


async def test_later_scope_refusal_refunds_earlier(health_store: HealthStore) -> None:
    """The endpoint's grant is given back when the bulkhead refuses."""
    ep, bh = scope("endpoint:a", rpm=10), scope("bulkhead:core", rpm=1)
    assert (await health_store.take_budget([ep, bh], 0, critical=False, now=T0)).granted
    refused = await health_store.take_budget([ep, bh], 0, critical=False, now=T0)
    assert refused.refused_by == "bulkhead:core"
    assert await levels(health_store, ep, T0) == {"requests": 9.0}


async def test_reserve_is_for_critical_roles(health_store: HealthStore) -> None:
    """Ordinary calls stop at the reserve; a critical call may use it."""
    s = scope(rpm=10, reserve=0.3)
    granted = 0
    while (await health_store.take_budget([s], 0, critical=False, now=T0)).granted:
        granted += 1
    assert granted == 7
    for _ in range(3):
        assert (await health_store.take_budget([s], 0, critical=True, now=T0)).granted
    assert not (await health_store.take_budget([s], 0, critical=True, now=T0)).granted


async def test_settle_charges_and_gives_back(health_store: HealthStore) -> None:
    """Usage above the estimate goes into debt; below it is given back (capped)."""
    s = scope(rpm=None, tpm=1000)
    grant = await health_store.take_budget([s], 500, critical=False, now=T0)
    await health_store.settle_budget(grant, 1200, T0)
    assert await levels(health_store, s, T0) == {"tokens": -200.0}
    assert not (await health_store.take_budget([s], 1, critical=False, now=T0)).granted
    grant2 = await health_store.take_budget([s], 100, critical=False, now=T0 + 60)
    assert grant2.granted
    await health_store.settle_budget(grant2, 0, T0 + 60)
    assert await levels(health_store, s, T0 + 60) == {"tokens": pytest.approx(800.0)}


async def test_oversized_request_waits_for_a_full_bucket(health_store: HealthStore) -> None:
    """A request larger than the bucket is granted once the bucket is full, never refused."""
    s = scope(rpm=None, tpm=100)
    assert (await health_store.take_budget([s], 250, critical=False, now=T0)).granted
    refused = await health_store.take_budget([s], 250, critical=False, now=T0 + 30)
    # 150 in debt, 50 refilled by T0+30: 200 more to a full bucket at 100/60 per second.
    assert refused.wait_s == pytest.approx(120.0)


async def test_two_workers_share_one_budget(redis_url: str, namespace: str) -> None:
    """Two Redis stores (two workers) draw from one bucket: 20 grants in total, not 40."""
    a = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    b = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    s = scope(rpm=20)
    try:
        results = await asyncio.gather(
            *(
                store.take_budget([s], 0, critical=False, now=T0)
                for _ in range(25)
                for store in (a, b)
            )
        )
        assert sum(r.granted for r in results) == 20
        assert (await a.budget_levels([s], T0))[0].level == pytest.approx(0.0)
        assert (await b.take_budget([s], 0, critical=False, now=T0 + 3)).granted
        assert not (await a.take_budget([s], 0, critical=False, now=T0 + 3)).granted
    finally:
        await a.close()
        await b.close()


async def test_pool_burst_is_not_an_outage(redis_url: str, namespace: str) -> None:
    """A burst far above the connection pool waits for connections instead of degrading."""
    store = RedisHealthStore(fail_fast_client(redis_url, max_connections=2), namespace=namespace)
    s = scope(rpm=1000)
    try:
        results = await asyncio.gather(
            *(store.take_budget([s], 0, critical=False, now=T0) for _ in range(300))
        )
        assert all(r.granted for r in results)
        status = await store.status()
        assert status.healthy, status.last_error
        assert (await store.budget_levels([s], T0))[0].level == pytest.approx(700.0)
    finally:
        await store.close()
