"""Benchmark: the CPU one model call costs on the provider path, streamed and not.

``resilient_complete`` streams every attempt (time to first token, idle budget, hedge
cancellation), while the bare arm of ``bench/overhead.py`` posts one JSON request; this
measures that difference alone: :func:`providers.registry.complete` against the simulator's
primary endpoint (in a child process, so only the client's CPU is counted), ``--calls``
calls at concurrency ``--concurrency`` through one shared client, streamed and JSON in
turn, ``--rounds`` times, each call with an ``on_progress`` callback like ``call_model``'s
(``--no-progress``: without, as before 2026-12-06). Prints JSON: CPU ms per call
(median of rounds) and the ratio. A regression here (say a stream that stops reusing its
connection, or per-token work) shows without Temporal in the way. Usage::

    .venv/bin/python bench/provider_cpu.py --calls 200 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_failover.providers.client import Budgets, build_http_client
from agent_failover.providers.registry import complete
from agent_failover.resilience.models import ChatRequest, Message
from bench.overhead import PRIMARY, SimProcess

BUDGETS = Budgets(connect_s=5.0, ttft_s=10.0, idle_s=10.0, total_s=30.0)


async def _cpu_per_call(
    http: Any, cfg: Any, stream: bool, calls: int, args: argparse.Namespace
) -> float:
    concurrency = args.concurrency
    progress = Progress(not args.no_progress)
    req = ChatRequest(
        messages=[Message(role="user", content="provider cpu")], max_tokens=64, stream=stream
    )
    sem = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with sem:
            await complete(http, cfg, req, BUDGETS, on_progress=progress.callback)

    await asyncio.gather(*(one() for _ in range(concurrency)))  # warm the pool
    cpu0 = time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    return (time.process_time() - cpu0) / calls * 1000


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the child simulator, measure both modes interleaved, return the document."""
    sim = await SimProcess().ready()
    cpu: dict[str, list[float]] = {"stream": [], "json": []}
    try:
        cfg = sim.endpoint_config(PRIMARY)
        async with build_http_client([cfg]) as http:
            for _ in range(args.rounds):
                for mode in cpu:
                    cpu[mode].append(
                        await _cpu_per_call(http, cfg, mode == "stream", args.calls, args)
                    )
    finally:
        await sim.stop()
    med = {m: round(statistics.median(v), 3) for m, v in cpu.items()}
    return {
        "setup": {
            "calls": args.calls,
            "concurrency": args.concurrency,
            "rounds": args.rounds,
            "on_progress": not args.no_progress,
        },
        "cpu_ms_per_call": med,
        "stream_vs_json": round(med["stream"] / med["json"], 2),
    }


class Progress:
    """What ``call_model`` passes as ``on_progress``: it keeps the newest text and estimate
    (its heartbeat loop reads them), so the benchmark pays what a worker's call pays."""

    def __init__(self, enabled: bool) -> None:
        self.text, self.tokens = "", 0
        self.callback = self.update if enabled else None

    def update(self, text: str, tokens: int) -> None:
        self.text, self.tokens = text, tokens


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--no-progress",
        action="store_true",
        help="call without on_progress (the figures before it was passed, 2026-12-06)",
    )
    print(json.dumps(asyncio.run(run(ap.parse_args(argv))), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
