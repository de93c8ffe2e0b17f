"""Benchmark: does shadow evaluation slow the calls it samples? Arms interleaved in one run.

Two roles on one dev server and simulator, identical but for ``shadow.sample_fraction``:
``plain`` (0: never shadowed) and ``plain-shadowed`` (1: every call starts a
``ShadowEvaluationWorkflow`` child on ``<queue>-shadow`` that re-asks the reference route,
``openai-us``). The primary has a fixed extra time to first token (``--ttft-ms``, 50 ms)
so both arms measure the same model time. ``--rounds`` rounds of ``--batch`` sequential
calls per arm, interleaved; prints JSON with p50/p95 end-to-end latency per arm (client
start to result), the difference, and how many shadow evaluations were recorded.

    .venv/bin/python bench/shadow_overhead.py --out bench/out/shadow_overhead.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import ShadowSettings
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.percentile import percentile
from agent_failover.testing.harness import make_harness, running
from agent_failover.testing.roles import with_test_roles
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.testing.workflows import CallInput, ResilientCallWorkflow

PRIMARY, REFERENCE = "anthropic-us-east", "openai-us"


def _policy(sim_url: str) -> Any:
    base = with_test_roles(load_policy(DEFAULT_POLICY_PATH, env={"SIM_URL": sim_url}))
    plain = base.role("plain")
    shadowed = plain.model_copy(
        update={
            "name": "plain-shadowed",
            "shadow": ShadowSettings(reference_route=REFERENCE, sample_fraction=1.0),
        }
    )
    return base.model_copy(update={"roles": {**base.roles, "plain-shadowed": shadowed}})


async def _one(h: Any, role: str) -> float:
    req = ChatRequest(
        messages=[Message(role="user", content=f"Reply with exactly: T{uuid.uuid4().hex[:8]}")],
        max_tokens=32,
    )
    t0 = time.perf_counter()
    await h.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role=role, request=req),
        id=f"bench-shadow-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=AgentOutput,
    )
    return (time.perf_counter() - t0) * 1000


def _stats(ms: list[float]) -> dict[str, float]:
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 1),
        "p95_ms": round(percentile(ms, 95), 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sim = await start_simulator(port=0)
    env = await start_dev_server(ui=False)
    admin = SimAdmin(sim.url)
    try:
        await admin.set_faults(PRIMARY, [{"kind": "latency", "seconds": args.ttft_ms / 1000}])
        h, workers = await make_harness(env.client, _policy(sim.url))
        arms: dict[str, list[float]] = {"plain": [], "plain-shadowed": []}
        async with running(workers):
            for role in arms:  # warm-up, not measured
                await _one(h, role)
            for _ in range(args.rounds):
                for role, samples in arms.items():
                    for _ in range(args.batch):
                        samples.append(await _one(h, role))
            await asyncio.sleep(1.0)  # let the last shadow evaluations land
            recorded = len((await h.health.quality("plain-shadowed", PRIMARY)).samples)
        off, on = _stats(arms["plain"]), _stats(arms["plain-shadowed"])
        return {
            "benchmark": "shadow_overhead",
            "ttft_ms": args.ttft_ms,
            "calls_per_arm": len(arms["plain"]),
            "shadow_off": off,
            "shadow_on": on,
            "p50_delta_ms": round(on["p50_ms"] - off["p50_ms"], 1),
            "shadow_evaluations_recorded": recorded,
        }
    finally:
        await admin.aclose()
        await env.shutdown()
        await sim.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    doc = asyncio.run(run(args))
    text = json.dumps(doc, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
