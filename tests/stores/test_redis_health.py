"""Redis-only guarantees of the health store: many workers, restarts, bounds, Redis loss.

Each "worker" is a separate :class:`RedisHealthStore` with its own client (so its own
connections), which is how separate worker processes look to Redis.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from agent_failover.resilience.breaker import BreakerReason
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState, CallOutcome
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.shadow import QualitySample
from agent_failover.stores.embedded_redis import EmbeddedRedis
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client

T0 = 1_700_000_000.0
ROUTE = "openai-us"
# The rate rules alone (the in-a-row rules are in the contract suite).
SETTINGS = BreakerSettings(consecutive_failures=None, consecutive_timeouts=None)


def err(at: float, ec: ErrorClass = ErrorClass.SERVER_ERROR, **kw: object) -> CallOutcome:
    """A failed call of class ``ec`` on ROUTE finishing at ``at``."""
    return CallOutcome(route=ROUTE, at=at, ok=False, error_class=ec, latency_ms=40.0, **kw)


def ok(at: float, **kw: object) -> CallOutcome:
    """A successful call on ROUTE finishing at ``at``."""
    return CallOutcome(route=ROUTE, at=at, ok=True, latency_ms=80.0, **kw)


def workers(url: str, namespace: str, n: int, **kw: object) -> list[RedisHealthStore]:
    """``n`` stores with their own clients, as ``n`` worker processes would have."""
    return [RedisHealthStore(fail_fast_client(url), namespace=namespace, **kw) for _ in range(n)]


async def close_all(stores: list[RedisHealthStore]) -> None:
    """Close every store."""
    for s in stores:
        await s.close()


async def test_concurrent_recorders_lose_nothing_and_trip_once(
    redis_url: str, namespace: str, redis_client
) -> None:
    """8 workers x 50 failing outcomes: all 400 are stored and exactly one CLOSED->OPEN."""
    stores = workers(redis_url, namespace, 8)

    async def run(w: int) -> list:
        store = stores[w]
        got = []
        for i in range(50):
            t = await store.record(err(T0 + i * 0.01 + w * 0.001), SETTINGS)
            if t is not None:
                got.append(t)
        return got

    try:
        results = await asyncio.gather(*(run(w) for w in range(8)))
    finally:
        await close_all(stores)
    transitions = [t for ts in results for t in ts]
    assert [(t.from_state, t.to_state) for t in transitions] == [
        (BreakerState.CLOSED, BreakerState.OPEN)
    ]
    probe = RedisHealthStore(redis_client, namespace=namespace)
    snap = await probe.snapshot([ROUTE], now=T0 + 1, window_s=30, min_calls=1)
    assert snap.get(ROUTE).stats.calls == 400
    b = await probe.breaker(ROUTE)
    assert b.state is BreakerState.OPEN and b.trips == 1
    snap = await probe.snapshot([ROUTE], now=T0 + 1, window_s=30, min_calls=10)
    assert snap.get(ROUTE).stats.calls == 400


async def test_concurrent_admits_respect_trial_budget(
    redis_url: str, namespace: str, redis_client
) -> None:
    """16 workers asking at once into a half-open breaker get exactly the trial budget."""
    first = RedisHealthStore(redis_client, namespace=namespace)
    await first.record(err(T0 - 1, ErrorClass.AUTH), SETTINGS)
    later = (await first.breaker(ROUTE)).open_until
    assert later is not None
    stores = workers(redis_url, namespace, 16)
    try:
        admissions = await asyncio.gather(*(s.admit(ROUTE, SETTINGS, later) for s in stores))
    finally:
        await close_all(stores)
    assert sum(a.permitted for a in admissions) == SETTINGS.half_open_max_trials
    b = await first.breaker(ROUTE)
    assert b.state is BreakerState.HALF_OPEN
    assert b.trials_in_flight(later) == SETTINGS.half_open_max_trials


async def test_state_survives_worker_restart(redis_url: str, namespace: str, redis_client) -> None:
    """A new store object (a restarted worker) sees the breaker and window left in Redis."""
    [old] = workers(redis_url, namespace, 1)
    for i in range(12):
        await old.record(err(T0 + i * 0.1), SETTINGS)
    await old.set_sla_demoted("planner", ROUTE, True)
    await old.close()

    fresh = RedisHealthStore(redis_client, namespace=namespace)
    snap = await fresh.snapshot([ROUTE], now=T0 + 2, window_s=30, min_calls=10, role="planner")
    rh = snap.get(ROUTE)
    assert rh.breaker is BreakerState.OPEN and rh.stats.calls == 12 and rh.sla_demoted
    assert not (await fresh.admit(ROUTE, SETTINGS, T0 + 3)).permitted


async def test_memory_is_bounded(redis_client, namespace: str) -> None:
    """One small hash per second of traffic, with a TTL: a second of 200 calls costs the
    same keys as a second of one, and nothing outlives the horizon by much."""
    store = RedisHealthStore(redis_client, namespace=namespace, horizon_s=100.0, ttl_s=300.0)
    for i in range(200):
        await store.record(ok(T0 + i / 400), SETTINGS)
    key = store.bucket_key(ROUTE, int(T0))
    assert await redis_client.hget(key, "c") == b"200"
    assert await redis_client.hkeys(key) == [b"c"]
    hist = store.bucket_key(ROUTE, int(T0)).replace(f":s:{int(T0)}", f":h:{int(T0) // 10}")
    assert await redis_client.hvals(hist) == [b"200"]  # one latency bin
    assert 0 < await redis_client.pttl(key) <= 160_000
    buckets = [k async for k in redis_client.scan_iter(match=f"{namespace}:h:*:s:*")]
    assert len(buckets) == 1


async def test_replayed_outcome_counts_once(redis_client, namespace: str) -> None:
    """The same record replayed with its nonce (its first write landed) is counted once."""
    store = RedisHealthStore(redis_client, namespace=namespace)
    await store._outcomes.record(ok(T0), SETTINGS, "feedfacecafebeef")
    await store._outcomes.record(ok(T0), SETTINGS, "feedfacecafebeef")
    await store._outcomes.record(ok(T0), SETTINGS, "0123456789abcdef")
    snap = await store.snapshot([ROUTE], now=T0 + 1, window_s=30, min_calls=1)
    assert snap.get(ROUTE).stats.calls == 2 and len(snap.get(ROUTE).recent) == 2


async def test_replayed_billed_outcome_costs_once(redis_client, namespace: str) -> None:
    """A billed outcome replayed with its nonce adds its tokens and spend once."""
    store = RedisHealthStore(redis_client, namespace=namespace)
    billed = ok(T0).model_copy(update={"tokens": 500, "cost_usd": 0.001})
    await store._outcomes.record(billed, SETTINGS, "feedfacecafebeef")
    await store._outcomes.record(billed, SETTINGS, "feedfacecafebeef")
    eff = await store.cost_efficiency(ROUTE, now=T0 + 1)
    assert (eff.current_attempts, eff.current_tokens) == (1, 500)
    assert eff.current_spend_usd == pytest.approx(0.001)


async def test_open_breaker_key_outlives_a_week(redis_client, namespace: str) -> None:
    """An open breaker's state does not expire within a week of the route's last outcome
    or probe (it would close silently); test_redis_keys_ttl checks the renewal."""
    store = RedisHealthStore(redis_client, namespace=namespace)
    await store.record(err(T0, ErrorClass.AUTH), SETTINGS)
    assert (await store.breaker(ROUTE)).state is BreakerState.OPEN
    assert await redis_client.pttl(store.breaker_key(ROUTE)) > 7 * 86_400_000


async def test_ttl_must_cover_horizon(redis_client, namespace: str) -> None:
    """A key TTL shorter than the window horizon is rejected at construction."""
    with pytest.raises(ValueError, match="horizon"):
        RedisHealthStore(redis_client, namespace=namespace, ttl_s=10.0, horizon_s=600.0)


async def test_redis_lost_mid_run(
    embedded_redis: EmbeddedRedis, caplog: pytest.LogCaptureFixture, fake_clock
) -> None:
    """Redis dies: calls keep working locally, status degrades; it returns: state resyncs."""
    clock = fake_clock
    store = RedisHealthStore(
        fail_fast_client(embedded_redis.url),
        namespace="lost",
        reconnect_interval_s=5.0,
        clock=clock,
    )
    try:
        for i in range(5):
            await store.record(ok(T0 + i), SETTINGS)
        await store.snapshot([ROUTE], now=T0 + 5, window_s=30, min_calls=10)

        caplog.set_level(logging.WARNING, logger="agent_failover.stores.redis_link")
        await asyncio.to_thread(embedded_redis.kill)
        transitions = [await store.record(err(T0 + 10 + i * 0.1), SETTINGS) for i in range(10)]
        # The local view was seeded with the 5 successes seen before the outage:
        # 10 errors of 15 calls trips on the error rate, exactly once.
        tripped = [t for t in transitions if t is not None]
        assert len(tripped) == 1 and tripped[0].reason is BreakerReason.ERROR_RATE
        snap = await store.snapshot([ROUTE], now=T0 + 12, window_s=30, min_calls=10)
        assert snap.store_degraded and snap.get(ROUTE).stats.calls == 15
        status = await store.status()
        assert not status.healthy and status.pending_sync == 10
        assert status.degraded_since == clock.now and "ConnectionError" in (status.last_error or "")
        warnings = [r for r in caplog.records if "unreachable" in r.getMessage()]
        assert len(warnings) == 1

        await asyncio.to_thread(embedded_redis.start)  # same port, empty (no persistence)
        clock.advance(2.0)
        assert not (await store.status()).healthy  # no reconnect before the interval
        clock.advance(5.0)
        status = await store.status()
        assert status.healthy and status.pending_sync == 0

        assert (await store.breaker(ROUTE)).state is BreakerState.OPEN
        snap = await store.snapshot([ROUTE], now=T0 + 12, window_s=30, min_calls=10)
        assert not snap.store_degraded and snap.get(ROUTE).breaker is BreakerState.OPEN
        assert snap.get(ROUTE).stats.calls == 10  # the replayed errors, into the empty server
    finally:
        await store.close()


async def test_replay_is_bounded(embedded_redis: EmbeddedRedis, fake_clock) -> None:
    """While degraded, at most max_pending writes are kept for replay; the rest are counted."""
    clock = fake_clock
    store = RedisHealthStore(
        fail_fast_client(embedded_redis.url),
        namespace="bounded",
        max_pending=5,
        reconnect_interval_s=60.0,
        clock=clock,
    )
    try:
        await asyncio.to_thread(embedded_redis.kill)
        for i in range(8):
            await store.record(ok(T0 + i), SETTINGS)
        status = await store.status()
        assert (status.pending_sync, status.dropped_sync) == (5, 3)
    finally:
        await store.close()


async def test_new_facts_survive_redis_loss(embedded_redis: EmbeddedRedis, fake_clock) -> None:
    """Learned windows, SLA since and 429 cool-downs are served locally while Redis is down
    and written back when it returns."""
    clock = fake_clock
    store = RedisHealthStore(
        fail_fast_client(embedded_redis.url),
        namespace="facts",
        reconnect_interval_s=5.0,
        clock=clock,
    )
    try:
        await store.learn_context_window(ROUTE, 128_000, T0)
        await store.snapshot([ROUTE], now=T0, window_s=30, min_calls=1, role="critic")
        await asyncio.to_thread(embedded_redis.kill)
        await store.learn_context_window("cheap-mini", 32_000, T0 + 1)
        await store.set_sla_demoted("critic", ROUTE, True, at=T0 + 2)
        cool = err(T0 + 3, ErrorClass.RATE_LIMITED, retry_after_s=4.0, counts_against_route=False)
        await store.record(cool, SETTINGS)
        snap = await store.snapshot(
            [ROUTE, "cheap-mini"], now=T0 + 4, window_s=30, min_calls=1, role="critic"
        )
        assert snap.store_degraded
        rh = snap.get(ROUTE)
        assert (rh.context_window, rh.sla_demoted, rh.sla_since) == (128_000, True, T0 + 2)
        assert rh.cooldown_until == T0 + 7.0 and rh.last_call_at == T0 + 3
        assert snap.get("cheap-mini").context_window == 32_000

        await asyncio.to_thread(embedded_redis.start)
        clock.advance(6.0)
        assert (await store.status()).healthy
        snap = await store.snapshot(
            [ROUTE, "cheap-mini"], now=T0 + 5, window_s=30, min_calls=1, role="critic"
        )
        assert not snap.store_degraded
        assert snap.get("cheap-mini").context_window == 32_000
        assert snap.get(ROUTE).context_window == 128_000  # restored into the empty server
        assert (snap.get(ROUTE).sla_demoted, snap.get(ROUTE).sla_since) == (True, T0 + 2)
        assert snap.get(ROUTE).cooldown_until == T0 + 7.0
    finally:
        await store.close()


async def test_quality_survives_redis_loss(embedded_redis: EmbeddedRedis, fake_clock) -> None:
    """A quality verdict seen before the outage is served locally; samples and verdicts
    written during it are kept locally and written back when Redis returns."""
    clock = fake_clock
    store = RedisHealthStore(
        fail_fast_client(embedded_redis.url),
        namespace="quality",
        reconnect_interval_s=5.0,
        clock=clock,
    )
    try:
        await store.set_quality_regressed("critic", ROUTE, True, at=T0, delta=0.6)
        await store.snapshot([ROUTE], now=T0, window_s=30, min_calls=1, role="critic")
        await asyncio.to_thread(embedded_redis.kill)
        snap = await store.snapshot([ROUTE], now=T0 + 1, window_s=30, min_calls=1, role="critic")
        assert snap.store_degraded and snap.get(ROUTE).quality_regressed
        for i in range(3):
            await store.record_quality("critic", ROUTE, QualitySample(at=T0 + 2 + i, score=1.0))
        await store.set_quality_regressed("critic", ROUTE, False, at=T0 + 5)
        assert [s.at for s in (await store.quality("critic", ROUTE)).samples] == [
            T0 + 2,
            T0 + 3,
            T0 + 4,
        ]

        await asyncio.to_thread(embedded_redis.start)  # empty: no persistence
        clock.advance(6.0)
        assert (await store.status()).healthy
        state = await store.quality("critic", ROUTE)
        assert len(state.samples) == 3 and (state.regressed, state.since) == (False, T0 + 5)
        snap = await store.snapshot([ROUTE], now=T0 + 6, window_s=30, min_calls=1, role="critic")
        assert not snap.store_degraded and not snap.get(ROUTE).quality_regressed
    finally:
        await store.close()
