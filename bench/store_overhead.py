"""Benchmark: what the health store adds per LLM call, against a bare Redis GET.

Every ``call_model`` activity does one ``record`` and every plan one ``snapshot``; this
measures both against real Redis (``$REDIS_URL``, default local 6379, else an embedded
server) next to a bare ``GET`` in the same run, so the ratios factor out the machine and
the network. Outcomes arrive on a fake clock at ``--rate`` calls per second per route
across the five simulator routes, so the breaker window holds a realistic number of
samples (``rate x 60 s``). Prints one JSON document to stdout; ``--png`` also draws a bar
chart of p50/p99. Usage::

    .venv/bin/python bench/store_overhead.py --iterations 2000 --png store_overhead.png
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.percentile import percentile
from agent_failover.stores.embedded_redis import EmbeddedRedis
from agent_failover.stores.health import HealthStore, MemoryHealthStore, RedisHealthStore
from agent_failover.stores.redis_link import REDIS_DOWN, fail_fast_client

ROUTES = ["anthropic-us-east", "anthropic-eu-west", "openai-us", "cheap-mini", "gemini-flash"]
T0 = 1_700_000_000.0


def _summary(samples_s: list[float]) -> dict[str, float]:
    us = [s * 1e6 for s in samples_s]
    return {
        "p50_us": round(percentile(us, 50) or 0.0, 1),
        "p99_us": round(percentile(us, 99) or 0.0, 1),
        "mean_us": round(sum(us) / len(us), 1),
    }


async def _timed(n: int, op: Callable[[int], Awaitable[Any]]) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        await op(i)
        out.append(time.perf_counter() - start)
    return out


def _outcome(i: int, rate: float) -> CallOutcome:
    # Roughly 5% errors and varied latency: enough to exercise the stats without tripping.
    failed = i % 20 == 7
    return CallOutcome(
        route=ROUTES[i % len(ROUTES)],
        at=T0 + i / (rate * len(ROUTES)),
        ok=not failed,
        error_class=ErrorClass.SERVER_ERROR if failed else None,
        latency_ms=300.0 + (i * 37) % 900,
        ttft_ms=80.0 + (i * 13) % 200,
    )


async def _bench_store(
    store: HealthStore, n: int, rate: float, warmup: int
) -> tuple[list[float], list[float]]:
    settings = BreakerSettings()
    for i in range(warmup):
        await store.record(_outcome(i, rate), settings)

    async def record(i: int) -> None:
        await store.record(_outcome(warmup + i, rate), settings)

    async def snapshot(i: int) -> None:
        now = _outcome(warmup + n - 1, rate).at
        await store.snapshot(ROUTES, now=now, window_s=30.0, min_calls=10)

    return await _timed(n, record), await _timed(n, snapshot)


async def run(iterations: int, rate: float, redis_url: str | None) -> dict[str, Any]:
    """Run the benchmark and return the result document."""
    url = redis_url or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    embedded: EmbeddedRedis | None = None
    client = fail_fast_client(url)
    try:
        await client.ping()
    except REDIS_DOWN:
        await client.aclose()
        embedded = await EmbeddedRedis().astart()
        url = embedded.url
        client = fail_fast_client(url)
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    # Fill the breaker window (60 s at `rate` calls/s per route) before measuring.
    warmup = int(rate * 60 * len(ROUTES))
    try:
        await client.set(f"{namespace}:get", b"x" * 64)
        get_s = await _timed(iterations, lambda _i: client.get(f"{namespace}:get"))
        redis_store = RedisHealthStore(client, namespace=namespace)
        rec_s, snap_s = await _bench_store(redis_store, iterations, rate, warmup)
        mem_rec_s, mem_snap_s = await _bench_store(MemoryHealthStore(), iterations, rate, warmup)
        keys = [k async for k in client.scan_iter(match=f"{namespace}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
        if embedded is not None:
            await embedded.astop()
    get, rec, snap = _summary(get_s), _summary(rec_s), _summary(snap_s)
    return {
        "redis": f"embedded {url}" if embedded else url,
        "iterations": iterations,
        "routes": len(ROUTES),
        "calls_per_s_per_route": rate,
        "outcomes_in_breaker_window": int(rate * 60),
        "redis_get": get,
        "redis_record": rec,
        "redis_snapshot_5_routes": snap,
        "memory_record": _summary(mem_rec_s),
        "memory_snapshot_5_routes": _summary(mem_snap_s),
        "ratios": {
            "record_p50_vs_get_p50": round(rec["p50_us"] / get["p50_us"], 2),
            "record_p99_vs_get_p99": round(rec["p99_us"] / get["p99_us"], 2),
            "snapshot_p50_vs_get_p50": round(snap["p50_us"] / get["p50_us"], 2),
            "snapshot_p99_vs_get_p99": round(snap["p99_us"] / get["p99_us"], 2),
        },
    }


def draw(result: dict[str, Any], path: str) -> None:
    """Bar chart of p50 and p99 per operation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = [
        "redis_get",
        "redis_record",
        "redis_snapshot_5_routes",
        "memory_record",
        "memory_snapshot_5_routes",
    ]
    labels = ["GET", "record", "snapshot\n(5 routes)", "memory\nrecord", "memory\nsnapshot"]
    p50 = [result[o]["p50_us"] for o in ops]
    p99 = [result[o]["p99_us"] for o in ops]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = range(len(ops))
    ax.bar([x - 0.2 for x in xs], p50, width=0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99")
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("microseconds")
    ax.set_title(
        f"Health store overhead ({result['iterations']} iterations, "
        f"{result['outcomes_in_breaker_window']} outcomes/route in window)"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print JSON, optionally draw the chart."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=5.0, help="calls/s per route (fake clock)")
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--png", default=None, help="write a bar chart here")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.rate <= 0:
        parser.error("--iterations must be >= 1 and --rate > 0")
    result = asyncio.run(run(args.iterations, args.rate, args.redis_url))
    if args.png:
        draw(result, args.png)
        result["png"] = args.png
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
