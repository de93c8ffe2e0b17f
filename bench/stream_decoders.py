"""Benchmark: decoding a Bedrock event stream next to decoding the same stream as SSE.

A ConverseStream answer arrives as binary AWS event-stream frames decoded with botocore's
parser (:mod:`providers.eventstream`); the other wires arrive as SSE
(:mod:`providers.sse`). Both decoders see the same number of token events, built by the
simulator's own encoders and fed in network-sized chunks, and the folding
(:class:`providers.bedrock.BedrockStream` vs :class:`providers.anthropic.AnthropicStream`)
runs too, so the figure is what one streamed reply costs the worker's CPU before any IO.
Prints one JSON document with events per second for each and their ratio. Usage::

    .venv/bin/python bench/stream_decoders.py --events 20000 --repeat 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_failover.providers.anthropic import AnthropicStream
from agent_failover.providers.base import Call
from agent_failover.providers.bedrock import BedrockStream
from agent_failover.providers.client import Budgets
from agent_failover.providers.wire import StreamState
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.testing.sim.wire import eventstream as es
from agent_failover.testing.sim.wire.base import sse

CHUNK = 1400  # a TCP segment's worth of payload per read


def _chunks(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]


def sse_stream(n: int) -> bytes:
    """An Anthropic stream of ``n`` four-character text deltas."""
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}
    out = [sse({"type": "message_start", "message": {"model": "m", "usage": {}}}, "message_start")]
    for i in range(n):
        body = {**delta, "delta": {**delta["delta"], "text": f"{i % 9999:04d}"}}
        out.append(sse(body, "content_block_delta"))
    out.append(
        sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, "message_delta")
    )
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return b"".join(out)


def eventstream(n: int) -> bytes:
    """A ConverseStream of ``n`` four-character text deltas."""
    out = [es.event("messageStart", {"role": "assistant"})]
    for i in range(n):
        out.append(
            es.event(
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"text": f"{i % 9999:04d}"}, "p": "abcd"},
            )
        )
    out.append(es.event("messageStop", {"stopReason": "end_turn"}))
    out.append(es.event("metadata", {"usage": {"inputTokens": 1, "outputTokens": n}}))
    return b"".join(out)


async def _call(kind: str) -> Call:
    ep = EndpointConfig(
        name="b", provider=kind, region="us-west-2", base_url="http://127.0.0.1:1", model="m",
        auth="none",
    )  # fmt: skip
    req = ChatRequest(messages=[Message(role="user", content="x")])
    return Call(client=None, endpoint=ep, request=req, budgets=Budgets())  # type: ignore[arg-type]


def _run(state: StreamState, chunks: list[bytes]) -> int:
    decoder = state.new_decoder()
    for chunk in chunks:
        for event in decoder.feed(chunk):
            state.on_event(event)
    assert state.finished and not state.malformed
    return state.events


def measure(make: Callable[[], StreamState], chunks: list[bytes], repeat: int) -> dict[str, Any]:
    """Events per second over ``repeat`` runs (median), and the events per run."""
    rates: list[float] = []
    events = 0
    for _ in range(repeat):
        state = make()
        t0 = time.perf_counter()
        events = _run(state, chunks)
        rates.append(events / (time.perf_counter() - t0))
    return {"events": events, "events_per_s_median": round(statistics.median(rates))}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    anthropic_call, bedrock_call = await _call("anthropic"), await _call("bedrock")
    sse_chunks = _chunks(sse_stream(args.events))
    es_chunks = _chunks(eventstream(args.events))
    result_sse = measure(lambda: AnthropicStream(anthropic_call), sse_chunks, args.repeat)
    result_es = measure(lambda: BedrockStream(bedrock_call), es_chunks, args.repeat)
    ratio = result_es["events_per_s_median"] / result_sse["events_per_s_median"]
    print(
        json.dumps(
            {
                "token_events": args.events,
                "chunk_bytes": CHUNK,
                "sse_anthropic": {**result_sse, "bytes": sum(map(len, sse_chunks))},
                "eventstream_bedrock": {**result_es, "bytes": sum(map(len, es_chunks))},
                "ratio_eventstream_over_sse": round(ratio, 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
