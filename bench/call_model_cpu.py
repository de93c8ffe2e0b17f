"""Benchmark: the CPU of one ``call_model`` attempt, next to its provider call alone.

``bench/stream_pump_cpu.py`` measures the provider call; a worker runs it inside the
``call_model`` activity, which adds the breaker's admission, the in-flight lease, the
heartbeat task, the reply's validation, the health record and the cache write. This
records the simulator primary's streamed reply once (as ``stream_pump_cpu.py`` does) and
replays it over an in-memory transport through both, in alternating rounds: ``provider``
is :func:`providers.registry.complete` with an ``on_progress`` callback like the
activity's, ``call_model`` the activity method called directly (no Temporal: no payloads,
no worker) with in-memory stores and the demo policy, a call every 50 ms of the
workflow's clock. Prints JSON: CPU ms per call per arm (median of ``--rounds``) and the
activity's own share. Usage::

    .venv/bin/python bench/call_model_cpu.py --calls 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import CallModelInput
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.providers.client import build_http_client
from agent_failover.providers.registry import complete
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore
from bench.stream_pump_cpu import BUDGETS, REQUEST, _record, _replay

#: The demo policy's role and its primary route (a mock transport answers for it).
ROLE, ROUTE = "analyst", "anthropic-us-east"


def _arms(rec: Any, cfg: Any) -> dict[str, Callable[[], Awaitable[Any]]]:
    """One call of each arm, over one client that replays the recorded reply."""
    transport = httpx.MockTransport(lambda _: _replay(200, rec.headers, rec.chunks))
    http = build_http_client(transport=transport)
    acts = LLMActivitySet(
        load_policy(DEFAULT_POLICY_PATH, env={}),
        http,
        MemoryHealthStore(),
        MemoryResponseCache(),
        task_queue_for=lambda _: "q",
    )
    clock = itertools.count()
    seen: dict[str, Any] = {}

    def progress(text: str, tokens: int) -> None:  # as call_model's _Progress.update
        seen["text"], seen["tokens"] = text, tokens

    async def provider() -> Any:
        return await complete(http, cfg, REQUEST, BUDGETS, on_progress=progress)

    async def call_model() -> Any:
        inp = CallModelInput(
            role=ROLE,
            route=ROUTE,
            request=REQUEST,
            ttft_budget_ms=BUDGETS.ttft_s * 1000,
            idle_budget_ms=BUDGETS.idle_s * 1000,
            timeout_ms=BUDGETS.total_s * 1000,
            now=1000.0 + next(clock) * 0.05,
        )
        return await acts.calls.call_model(inp)

    return {"provider": provider, "call_model": call_model}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Record once, then time the arms in alternating rounds; return the document."""
    rec, cfg = await _record()
    arms = _arms(rec, cfg)
    cpu: dict[str, list[float]] = {name: [] for name in arms}
    for op in arms.values():
        for _ in range(20):  # warm-up: imports, first-call caches
            await op()
    for _ in range(args.rounds):
        for name, op in arms.items():
            cpu0 = time.process_time()
            for _ in range(args.calls):
                await op()
            cpu[name].append((time.process_time() - cpu0) / args.calls * 1000)
    med = {name: round(statistics.median(v), 3) for name, v in cpu.items()}
    return {
        "setup": {"calls": args.calls, "rounds": args.rounds, "chunks": len(rec.chunks)},
        "cpu_ms_per_call": med,
        "activity_own_ms": round(med["call_model"] - med["provider"], 3),
        "call_model_vs_provider": round(med["call_model"] / med["provider"], 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    print(json.dumps(asyncio.run(run(ap.parse_args(argv))), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
