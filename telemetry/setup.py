"""OpenTelemetry wiring: OTLP when an endpoint is configured, else in-memory/console exporters.

``setup_telemetry`` is called once by entry points (worker, CLI); library code only asks
for :func:`meter` / :func:`tracer`, which fall back to OpenTelemetry's global no-op
providers until setup runs, so tests never need a collector.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    InMemoryMetricReader,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_failover.telemetry.names import METER_NAME, TRACER_NAME


@dataclass
class Telemetry:
    """Handles to what :func:`setup_telemetry` installed (for tests and shutdown)."""

    meter_provider: MeterProvider
    tracer_provider: TracerProvider
    metric_reader: MetricReader
    span_exporter: InMemorySpanExporter | None

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def setup_telemetry(service_name: str = "agent-failover", *, mode: str | None = None) -> Telemetry:
    """Install global providers. ``mode``: ``memory`` (default), ``console`` or ``otlp``.

    ``otlp`` needs the ``opentelemetry-exporter-otlp`` package and honours the standard
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` variable; the mode defaults to ``FAILOVER_TELEMETRY``.
    """
    mode = (mode or os.environ.get("FAILOVER_TELEMETRY", "memory")).lower()
    resource = Resource.create({"service.name": service_name})
    span_exporter: InMemorySpanExporter | None = None
    tracer_provider = TracerProvider(resource=resource)
    reader: MetricReader
    if mode == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:  # pragma: no cover - depends on optional install
            raise RuntimeError(
                "FAILOVER_TELEMETRY=otlp needs `pip install opentelemetry-exporter-otlp`"
            ) from exc
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
    elif mode == "console":
        tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        reader = PeriodicExportingMetricReader(ConsoleMetricExporter(), 60_000)
    elif mode == "memory":
        span_exporter = InMemorySpanExporter()
        tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        reader = InMemoryMetricReader()
    else:
        raise ValueError(f"FAILOVER_TELEMETRY must be memory, console or otlp, not {mode!r}")
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return Telemetry(meter_provider, tracer_provider, reader, span_exporter)


def meter() -> metrics.Meter:
    """The project's meter (global provider; no-op until setup)."""
    return metrics.get_meter(METER_NAME)


def tracer() -> trace.Tracer:
    """The project's tracer (global provider; no-op until setup)."""
    return trace.get_tracer(TRACER_NAME)
