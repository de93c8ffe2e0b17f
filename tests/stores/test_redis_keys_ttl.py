"""Every key the Redis stores write has a TTL (the layout in :mod:`stores.redis_keys`), so
nothing grows with time, traffic or policy churn. The one exception is a forced breaker:
an operator's decision, at most one key per route.

The test drives every writer (outcomes and probes, a trip and a half-open trial, SLA
demotion, shadow samples and a quality verdict, cost verdict, context window, baselines,
budgets, a call in flight, the response cache, policy versions), then enumerates the
namespace's keys.
"""

from __future__ import annotations

from agent_failover.resilience.budget import Bucket, BudgetUnit, Scope
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState, CallOutcome
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.shadow import QualitySample
from agent_failover.resilience.windows import DEFAULT_HORIZON_S
from agent_failover.stores.cache import CachedEntry, RedisResponseCache
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.policies import content_ref
from agent_failover.stores.redis_keys import IDLE_TTL_MS, max_keys_per_route
from agent_failover.stores.redis_policies import RedisPolicyStore

T0 = 1_700_000_000.0
ROUTES = ("openai-us", "cheap-mini")
FORCED = "gemini-flash"
SETTINGS = BreakerSettings(consecutive_failures=3, consecutive_timeouts=None, min_calls=5)


def _outcome(route: str, at: float, ok: bool, **kw: object) -> CallOutcome:
    error = None if ok else ErrorClass.SERVER_ERROR
    return CallOutcome(route=route, at=at, ok=ok, error_class=error, latency_ms=90.0, **kw)


async def _burst(store: RedisHealthStore, route: str) -> None:
    """Traffic, a trip, probes and a half-open trial on ``route``, with every fact kind."""
    for i in range(40):  # healthy billed calls over a few seconds (baselines, cost buckets)
        await store.record(_outcome(route, T0 + i / 8, True, tokens=100, cost_usd=0.0001), SETTINGS)
    for i in range(6):  # failures in a row: the breaker opens (its hash is written)
        await store.record(_outcome(route, T0 + 6 + i / 10, False), SETTINGS)
    await store.record(_outcome(route, T0 + 8, True, probe=True), SETTINGS)
    await store.admit(route, SETTINGS, T0 + 120)  # a half-open trial slot
    await store.set_sla_demoted("planner", route, True, at=T0 + 9)
    await store.record_quality("planner", route, QualitySample(at=T0 + 9, score=0.4))
    await store.set_quality_regressed("planner", route, True, at=T0 + 9, delta=0.3)
    await store.set_cost_demoted(route, True, at=T0 + 9)
    await store.learn_context_window(route, 8192, T0 + 9)
    await store.cost_efficiency(route, now=T0 + 10)
    await store.latency_baseline(route, now=T0 + 10, min_samples=5)
    await store.snapshot([route], now=T0 + 10, window_s=30, min_calls=1, role="planner")
    await store.in_flight.start(route, "lease-1", now=T0 + 10, until=T0 + 40)
    scope = Scope(name=f"endpoint:{route}", buckets=[Bucket(unit=BudgetUnit.REQUESTS, capacity=60)])
    await store.take_budget([scope], 10, critical=False, now=T0 + 10)


async def test_every_key_has_a_ttl_but_a_forced_breaker(redis_client, namespace: str) -> None:
    store = RedisHealthStore(redis_client, namespace=namespace)
    for route in ROUTES:
        await _burst(store, route)
    await store.force(FORCED, BreakerState.FORCED_OPEN, T0 + 11)
    cache = RedisResponseCache(redis_client, namespace=namespace)
    await cache.put("k1", CachedEntry(role="planner", content="x", stored_at=T0), keep_s=60)
    await RedisPolicyStore(redis_client, namespace=namespace).put(content_ref("{}"), "{}")

    keys = {
        k.decode(): await redis_client.pttl(k)
        async for k in redis_client.scan_iter(match=f"{namespace}:*", count=1000)
    }
    untimed = sorted(k for k, ttl in keys.items() if ttl == -1)
    assert untimed == [store.breaker_key(FORCED)]
    kinds = {k.split("}:")[-1] for k in keys if "}:" in k}
    assert {"b", "qr", "r", "p", "base", "cw", "cv", "f"} <= kinds  # every writer ran
    assert any(f"{namespace}:sla:" in k for k in keys)
    assert any(f"{namespace}:slat:" in k for k in keys)
    for route in ROUTES:
        mine = [k for k in keys if f":h:{{{route}}}:" in k]
        assert len(mine) <= max_keys_per_route(DEFAULT_HORIZON_S, roles=1)


async def test_an_outcome_renews_the_breaker_key(redis_client, namespace: str) -> None:
    """An open breaker of a route still in use never expires: every outcome or probe
    recorded on the route renews its key's TTL; releasing a forced breaker gives it one."""
    store = RedisHealthStore(redis_client, namespace=namespace)
    route = ROUTES[0]
    for i in range(6):
        await store.record(_outcome(route, T0 + i / 10, False), SETTINGS)
    key = store.breaker_key(route)
    assert (await store.breaker(route)).state is BreakerState.OPEN
    await redis_client.pexpire(key, 5_000)  # as if a week had nearly passed
    await store.record(_outcome(route, T0 + 10, False, probe=True), SETTINGS)
    assert await redis_client.pttl(key) > IDLE_TTL_MS - 60_000
    await store.force(route, BreakerState.FORCED_OPEN, T0 + 11)
    await store.record(_outcome(route, T0 + 12, False, probe=True), SETTINGS)
    assert await redis_client.pttl(key) == -1
    await store.force(route, None, T0 + 13)
    assert await redis_client.pttl(key) > IDLE_TTL_MS - 60_000
