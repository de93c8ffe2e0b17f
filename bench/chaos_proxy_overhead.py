"""Benchmark: what the chaos proxy adds to a request when it injects nothing.

Starts the simulator (its base latency set to zero, so the proxy's share is visible) and
a chaos proxy in front of it with a timeline that never fires, then times the same
Anthropic Messages request directly and through the proxy, interleaved: a non-streamed
reply (time to the whole body) and a streamed one (time to the first event and to the
end). Prints one JSON document with p50/p95 per path and the added milliseconds. Usage::

    .venv/bin/python bench/chaos_proxy_overhead.py --requests 300
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx

from agent_failover.resilience.percentile import percentile
from agent_failover.testing.chaos_proxy import ProxyScenario, start_chaos_proxy
from agent_failover.testing.sim.config import LatencyModel, load_sim_config
from agent_failover.testing.sim.server import start_simulator

NEVER = ProxyScenario.model_validate({"events": [{"from": 1e9, "path": "/x", "answers": 500}]})
BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Summarise the incident report"}],
}


async def one(client: httpx.AsyncClient, url: str, stream: bool) -> tuple[float, float]:
    """(time to first body bytes, time to the end) in ms."""
    t0 = time.perf_counter()
    first = None
    async with client.stream("POST", url, json={**BODY, "stream": stream}) as r:
        async for _ in r.aiter_raw():
            first = first or time.perf_counter()
    end = time.perf_counter()
    return ((first or end) - t0) * 1000, (end - t0) * 1000


def stats(values: list[float]) -> dict[str, float]:
    return {f"p{q}_ms": round(percentile(values, q) or 0.0, 3) for q in (50, 95)}


async def main(requests: int) -> dict:
    cfg = load_sim_config()
    fast = [
        e.model_copy(update={"latency": LatencyModel(ttft_median_ms=0.0)}) for e in cfg.endpoints
    ]
    sim = await start_simulator(config=cfg.model_copy(update={"endpoints": fast}))
    proxy = await start_chaos_proxy(sim.url, NEVER)
    paths = {"direct": sim.url, "proxy": proxy.url}
    out: dict[str, dict[str, list[float]]] = {
        p: {"json_total": [], "stream_first": [], "stream_total": []} for p in paths
    }
    try:
        async with httpx.AsyncClient() as client:
            for i in range(requests + 20):
                for name, base in paths.items():
                    url = f"{base}/anthropic-us-east/v1/messages"
                    _, total = await one(client, url, False)
                    first, s_total = await one(client, url, True)
                    if i >= 20:  # warm-up: connections, imports, caches
                        out[name]["json_total"].append(total)
                        out[name]["stream_first"].append(first)
                        out[name]["stream_total"].append(s_total)
    finally:
        await proxy.stop()
        await sim.stop()
    report: dict = {"requests_per_path": requests}
    for name, series in out.items():
        report[name] = {k: stats(v) for k, v in series.items()}
    report["added_p50_ms"] = {
        k: round(report["proxy"][k]["p50_ms"] - report["direct"][k]["p50_ms"], 3)
        for k in out["direct"]
    }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.requests)), indent=2))
