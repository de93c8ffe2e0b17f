"""Benchmark: what the payload codec adds to converting a payload, side by side in one run.

For answer-sized values (1 KiB, 16 KiB, 256 KiB of text inside a pydantic model) it times
``DataConverter.encode`` + ``decode`` with the plain pydantic converter and with the
AES-256-GCM codec, and reports the per-payload p50/p99 of each, their ratio, and the bytes
each payload takes. Prints one JSON document. Usage::

    .venv/bin/python bench/codec_overhead.py --iterations 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

from pydantic import BaseModel
from temporalio.converter import DataConverter

from agent_failover.codec import AesGcmCodec, failover_data_converter
from agent_failover.resilience.percentile import percentile

SIZES = {"1KiB": 1024, "16KiB": 16 * 1024, "256KiB": 256 * 1024}


class Answer(BaseModel):
    role: str
    content: str


async def _round_trips(conv: DataConverter, value: Answer, n: int) -> tuple[list[float], int]:
    times, size = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        (p,) = await conv.encode([value])
        await conv.decode([p], [Answer])
        times.append((time.perf_counter() - t0) * 1e6)
        size = p.ByteSize()
    return times, size


async def main(iterations: int) -> dict:
    codec = AesGcmCodec({"bench": os.urandom(32)})
    # Both on our payload converter: the arms differ by the codec only.
    arms = {"plain": failover_data_converter(), "aes-gcm": failover_data_converter(codec)}
    out: dict = {"iterations": iterations, "unit": "microseconds per encode+decode", "sizes": {}}
    for label, size in SIZES.items():
        value = Answer(role="synthesis", content="x" * size)
        row = {}
        for arm, conv in arms.items():
            await _round_trips(conv, value, 50)  # warm-up
            times, nbytes = await _round_trips(conv, value, iterations)
            row[arm] = {"p50": percentile(times, 50), "p99": percentile(times, 99), "bytes": nbytes}
        row["ratio_p50"] = row["aes-gcm"]["p50"] / row["plain"]["p50"]
        row["ratio_p99"] = row["aes-gcm"]["p99"] / row["plain"]["p99"]
        row["extra_bytes"] = row["aes-gcm"]["bytes"] - row["plain"]["bytes"]
        out["sizes"][label] = row
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.iterations)), indent=2))
