"""Chaos: the shared Redis dies mid-run and comes back on the same port. Pipelines keep
completing on the stores' local views (reported degraded) and the stores heal after."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis

from agent_failover.stores.embedded_redis import EmbeddedRedis
from agent_failover.testing.sim.admin import SimAdmin
from tests.chaos.conftest import build_worker
from tests.chaos.helpers import (
    PRIMARY,
    assert_conduct,
    assert_consistent,
    eventually,
    results_of,
    start_pipeline,
    wait_until_steps,
)
from tests.workflows.conftest import running

pytestmark = [pytest.mark.chaos, pytest.mark.devserver, pytest.mark.redis]


async def _batch(h, label: str, n: int = 3):
    return [await start_pipeline(h, f"redis chaos {label} {i}") for i in range(n)]


async def _buckets(probe: aioredis.Redis, h, lo: float, hi: float) -> list[int]:
    """The seconds in [lo, hi] for which the primary has an aggregate bucket in Redis."""
    seconds = range(int(lo), int(hi) + 1)
    found = [await probe.exists(h.health.bucket_key(PRIMARY, s)) for s in seconds]
    return [s for s, n in zip(seconds, found, strict=True) if n]


async def test_pipelines_complete_through_redis_loss_and_recovery(
    dev_env, policy, sim_admin: SimAdmin
) -> None:
    """Healthy → killed mid-run (degraded, still answering) → restarted (healthy, resynced)."""
    # A little latency keeps pipelines in flight long enough to lose Redis under them.
    await sim_admin.set_faults(PRIMARY, [{"kind": "latency", "seconds": 0.3}])
    server = await EmbeddedRedis().astart()
    probe = aioredis.Redis.from_url(server.url)
    h, workers = build_worker(dev_env.client, policy, redis_url=server.url)
    try:
        async with running(workers):
            before = await results_of(await _batch(h, "before"), timeout_s=15)
            assert (await h.health.status()).healthy and (await h.cache.status()).healthy
            assert await _buckets(probe, h, time.time() - 60, time.time())

            during = await _batch(h, "during")
            await wait_until_steps(during[0], 1)
            await asyncio.to_thread(server.kill)
            lost_at = time.time()
            during_results = await results_of(during, timeout_s=20)
            after_kill = await results_of(await _batch(h, "down"), timeout_s=20)
            health, cache = await h.health.status(), await h.cache.status()
            assert not health.healthy and health.degraded_since is not None
            assert health.pending_sync > 0, "outcomes recorded while down must wait for replay"
            assert not cache.healthy

            back_at = time.time()
            await server.astart()  # same port, empty: no snapshot survived the crash
            assert server.running
            recovered = await results_of(await _batch(h, "back"), timeout_s=15)

            async def healed() -> bool:
                return (await h.health.status()).healthy and (await h.cache.status()).healthy

            await eventually(healed)
            health = await h.health.status()
            assert health.pending_sync == 0 and health.dropped_sync == 0
            # the outage's outcomes were replayed into the new, empty server
            await probe.connection_pool.disconnect()
            assert await _buckets(probe, h, lost_at, back_at)
        results = [*before, *during_results, *after_kill, *recovered]
        for r in results:
            assert_consistent(r)
        assert_conduct(results, await sim_admin.attempts())
    finally:
        await probe.aclose()
        await h.health.close()
        await h.cache.close()
        await server.astop()
