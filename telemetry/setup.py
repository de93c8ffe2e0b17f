"""OpenTelemetry wiring from the standard ``OTEL_*`` environment, off unless configured.

``setup_telemetry`` is called once by entry points (the worker, ``failover`` commands).
It installs what :class:`~agent_failover.telemetry.config.TelemetryConfig` reads from
``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` (``console``, ``otlp``, ``none``;
metrics also ``prometheus``), ``OTEL_EXPORTER_OTLP_ENDPOINT`` (which alone turns OTLP on)
and ``FAILOVER_METRICS_PORT`` (a Prometheus scrape endpoint); ``OTEL_SERVICE_NAME`` /
``OTEL_RESOURCE_ATTRIBUTES`` win over the entry point's default name.
With nothing set it installs nothing: library code then talks to OpenTelemetry's no-op
providers and ``FailoverPlugin`` adds no tracing interceptor, so the hot path pays nothing.

The tracer provider is Temporal's replay-safe one (spans made in workflow code are not
duplicated on replay) and the meter provider is wrapped in ``ReplaySafeMeterProvider``
for the same reason. Tests pass in-memory exporters/readers instead of the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

from agent_failover.telemetry.config import TelemetryConfig, TelemetryConfigError
from agent_failover.telemetry.names import METER_NAME, TRACER_NAME

#: Console metrics every minute: more often drowns the logs.
CONSOLE_METRICS_INTERVAL_MS = 60_000


@dataclass
class Telemetry:
    """What :func:`setup_telemetry` installed; ``shutdown`` flushes and uninstalls it."""

    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    metrics_server: Any = None
    metrics_port: int | None = None
    readers: list[MetricReader] = field(default_factory=list)

    @property
    def tracing(self) -> bool:
        return self.tracer_provider is not None

    def shutdown(self) -> None:
        """Flush exporters, stop the scrape endpoint and put the no-op providers back."""
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server.server_close()
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown()
        reset_global_providers()


def resource(default_service_name: str) -> Resource:
    """The process's resource: ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` win;
    ``default_service_name`` only fills in when neither names the service."""
    detected = Resource.create({})
    if str(detected.attributes.get("service.name", "")).startswith("unknown_service"):
        return detected.merge(Resource({"service.name": default_service_name}))
    return detected


def setup_telemetry(
    service_name: str = "agent-failover",
    *,
    config: TelemetryConfig | None = None,
    span_exporter: SpanExporter | None = None,
    metric_readers: Sequence[MetricReader] = (),
) -> Telemetry:
    """Install the global tracer and meter providers the configuration asks for.

    ``config`` defaults to :meth:`TelemetryConfig.from_env`. ``span_exporter`` and
    ``metric_readers`` add in-process exporters (tests use the in-memory ones); they turn
    tracing / metrics on by themselves. Returns a :class:`Telemetry` (all None when off).
    """
    config = TelemetryConfig.from_env() if config is None else config
    res = resource(service_name)
    out = Telemetry()
    processors = _span_processors(config.traces, span_exporter)
    if processors:
        from temporalio.contrib.opentelemetry import create_tracer_provider

        out.tracer_provider = create_tracer_provider(resource=res)
        for p in processors:
            out.tracer_provider.add_span_processor(p)
        trace.set_tracer_provider(out.tracer_provider)
    registry = None
    if "prometheus" in config.metrics:
        from agent_failover.telemetry.prometheus import new_registry

        registry = new_registry()
    readers = [*metric_readers, *_metric_readers(config, registry)]
    if readers:
        from temporalio.contrib.opentelemetry import ReplaySafeMeterProvider

        out.readers = readers
        out.meter_provider = MeterProvider(resource=res, metric_readers=readers)
        metrics.set_meter_provider(ReplaySafeMeterProvider(out.meter_provider))
    if "prometheus" in config.metrics and config.metrics_port is not None:
        from agent_failover.telemetry.prometheus import serve_metrics

        out.metrics_server = serve_metrics(config.metrics_host, config.metrics_port, registry)
        out.metrics_port = out.metrics_server.server_port
    return out


def _span_processors(mode: str, extra: SpanExporter | None) -> list[Any]:
    processors: list[Any] = [SimpleSpanProcessor(extra)] if extra is not None else []
    if mode == "console":
        processors.append(SimpleSpanProcessor(ConsoleSpanExporter()))
    elif mode == "otlp":
        processors.append(BatchSpanProcessor(_otlp("trace_exporter", "OTLPSpanExporter")()))
    return processors


def _metric_readers(config: TelemetryConfig, registry: Any) -> list[MetricReader]:
    readers: list[MetricReader] = []
    if "console" in config.metrics:
        readers.append(
            PeriodicExportingMetricReader(ConsoleMetricExporter(), CONSOLE_METRICS_INTERVAL_MS)
        )
    if "otlp" in config.metrics:
        readers.append(
            PeriodicExportingMetricReader(_otlp("metric_exporter", "OTLPMetricExporter")())
        )
    if "prometheus" in config.metrics:
        from agent_failover.telemetry.prometheus import prometheus_reader

        readers.append(prometheus_reader(registry))
    return readers


def _otlp(module: str, name: str) -> Any:
    try:
        mod = __import__(f"opentelemetry.exporter.otlp.proto.http.{module}", fromlist=[name])
    except ImportError as exc:
        raise TelemetryConfigError(
            "OTLP export needs the [otlp] extra: pip install 'agent-failover[otlp]'"
        ) from exc
    return getattr(mod, name)


def reset_global_providers() -> None:
    """Put OpenTelemetry's no-op providers back (they are set-once otherwise).

    For shutdown and tests: proxies handed out earlier re-bind when a provider is set again.
    """
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None


def tracing_enabled() -> bool:
    """True once a replay-safe tracer provider is installed (what the Temporal plugin needs)."""
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider

    return isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider)


def meter() -> metrics.Meter:
    """The project's meter (global provider; no-op until setup)."""
    return metrics.get_meter(METER_NAME)


def tracer() -> trace.Tracer:
    """The project's tracer (global provider; no-op until setup)."""
    return trace.get_tracer(TRACER_NAME)
