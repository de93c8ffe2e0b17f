"""Benchmark: what telemetry adds to one model attempt, off and on, side by side in one run.

Times the instrumentation one attempt runs (the attempt span opened and closed with its
GenAI attributes, a substitution event, the activity's GenAI metrics and counters) with
nothing configured (OpenTelemetry's no-op providers: the default) and with tracing and
metrics on (Temporal's replay-safe tracer provider, an in-memory exporter and reader),
against an empty loop. Reports per-attempt p50/p99 in microseconds and the ratios.
Prints one JSON document. Usage::

    .venv/bin/python bench/telemetry_overhead.py --iterations 20000
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.models import ChatReply, FinishReason, Usage
from agent_failover.resilience.percentile import percentile
from agent_failover.telemetry import names, record
from agent_failover.telemetry.config import TelemetryConfig
from agent_failover.telemetry.setup import setup_telemetry
from agent_failover.telemetry.spans import end_attempt_span, event, start_attempt_span


def _attempt(endpoint, reply: ChatReply) -> None:
    span = start_attempt_span(
        role="analyst",
        route=endpoint.name,
        model=endpoint.model,
        provider="anthropic",
        tier=1,
        attempt=2,
        hedge=False,
    )
    event(names.EV_SUBSTITUTION, {"failover.from": "a", "failover.to": "b"}, span=span)
    record.attempt_answered("analyst", endpoint, reply)
    end_attempt_span(
        span,
        outcome="ok",
        response_model=reply.model,
        input_tokens=reply.usage.input_tokens,
        output_tokens=reply.usage.output_tokens,
        finish_reason="stop",
        reason_codes=["STANDBY_ROUTE"],
    )


def _time(fn: Callable[[], None], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def _stats(samples: list[float]) -> dict[str, float]:
    return {
        "p50_us": round(percentile(samples, 50), 2),
        "p99_us": round(percentile(samples, 99), 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=20_000)
    n = p.parse_args().iterations
    policy = load_policy(DEFAULT_POLICY_PATH)
    endpoint = next(iter(policy.endpoints.values()))
    reply = ChatReply(
        text="x", endpoint=endpoint.name, model=endpoint.model, finish_reason=FinishReason.STOP,
        usage=Usage(input_tokens=120, output_tokens=80), cost_usd=0.001, ttft_ms=40,
        latency_ms=300,
    )  # fmt: skip
    empty = _time(lambda: None, n)
    off = _time(lambda: _attempt(endpoint, reply), n)
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tel = setup_telemetry(
        "bench", config=TelemetryConfig(), span_exporter=spans, metric_readers=[reader]
    )
    try:
        on = _time(lambda: _attempt(endpoint, reply), n)
        exported = len(spans.get_finished_spans())
    finally:
        tel.shutdown()
    result = {
        "iterations": n,
        "empty_loop": _stats(empty),
        "telemetry_off": _stats(off),
        "telemetry_on": _stats(on),
        "spans_exported_on": exported,
        "off_minus_empty_p50_us": round(percentile(off, 50) - percentile(empty, 50), 2),
        "on_over_off_p50": round(percentile(on, 50) / percentile(off, 50), 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
