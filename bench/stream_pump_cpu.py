"""Benchmark: the client CPU of one streamed reply with the network taken out.

``bench/provider_cpu.py`` measures a streamed call end to end (httpx, httpcore, h11, the
socket), where our own per-chunk work is a minority and machine noise is large. This
records the simulator primary's streamed reply once, chunk for chunk as it came off the
wire, then replays it ``--calls`` times through :func:`providers.registry.complete` over
an in-memory transport: what is left is the streaming pump (budgets, SSE decoding, the
wire's fold, the reply, progress reports to a callback like ``call_model``'s;
``--no-progress``: none, as before 2026-12-06), plus httpx's response iteration. Prints
JSON: CPU ms per call (median of ``--rounds``), the chunks and events per reply and CPU µs
per chunk. Usage::

    .venv/bin/python bench/stream_pump_cpu.py --calls 2000 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from agent_failover.providers.client import Budgets, build_http_client
from agent_failover.providers.registry import complete
from agent_failover.resilience.models import ChatRequest, Message
from bench.overhead import PRIMARY, SimProcess
from bench.provider_cpu import Progress

BUDGETS = Budgets(connect_s=5.0, ttft_s=10.0, idle_s=10.0, total_s=30.0)
REQUEST = ChatRequest(messages=[Message(role="user", content="pump cpu")], max_tokens=64)


class _Recorder(httpx.AsyncBaseTransport):
    """Forwards to the simulator and keeps the streamed body's chunks as they came."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.chunks: list[bytes] = []
        self.headers: list[tuple[bytes, bytes]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        self.chunks = [chunk async for chunk in response.stream]
        await response.aclose()
        self.headers = list(response.headers.raw)
        return _replay(response.status_code, self.headers, self.chunks)


def _replay(status: int, headers: Any, chunks: list[bytes]) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return httpx.Response(status, headers=headers, content=body())


async def _record() -> tuple[_Recorder, Any]:
    """The primary's streamed reply as the simulator sent it, and the endpoint's config."""
    sim = await SimProcess().ready()
    try:
        recorder = _Recorder()
        cfg = sim.endpoint_config(PRIMARY)
        async with build_http_client(transport=recorder) as http:
            await complete(http, cfg, REQUEST, BUDGETS)
        return recorder, cfg
    finally:
        await sim.stop()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Record once, replay ``--calls`` times per round, return the document."""
    rec, cfg = await _record()
    transport = httpx.MockTransport(lambda _: _replay(200, rec.headers, rec.chunks))
    cpu: list[float] = []
    on_progress = Progress(not args.no_progress).callback
    async with build_http_client(transport=transport) as http:
        reply = await complete(http, cfg, REQUEST, BUDGETS, on_progress=on_progress)
        for _ in range(args.rounds):
            cpu0 = time.process_time()
            for _ in range(args.calls):
                await complete(http, cfg, REQUEST, BUDGETS, on_progress=on_progress)
            cpu.append((time.process_time() - cpu0) / args.calls * 1000)
    per_call = statistics.median(cpu)
    events = sum(chunk.count(b"\n\n") for chunk in rec.chunks)
    return {
        "setup": {
            "calls": args.calls,
            "rounds": args.rounds,
            "on_progress": on_progress is not None,
        },
        "reply": {"chunks": len(rec.chunks), "sse_events": events, "chars": len(reply.text)},
        "cpu_ms_per_call": round(per_call, 3),
        "cpu_us_per_chunk": round(per_call * 1000 / len(rec.chunks), 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--no-progress",
        action="store_true",
        help="call without on_progress (the figures before it was passed, 2026-12-06)",
    )
    print(json.dumps(asyncio.run(run(ap.parse_args(argv))), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
