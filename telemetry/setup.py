"""OpenTelemetry wiring from the standard ``OTEL_*`` environment, off unless configured.

``setup_telemetry`` is called once by entry points (the worker, ``failover`` commands).
It reads ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` (``console``, ``otlp``,
``none``; metrics also ``prometheus``), ``OTEL_EXPORTER_OTLP_ENDPOINT`` (which alone turns
OTLP on), ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (they win over the entry
point's default name) and ``FAILOVER_METRICS_PORT`` (a Prometheus scrape endpoint).
With nothing set it installs nothing: library code then talks to OpenTelemetry's no-op
providers and ``FailoverPlugin`` adds no tracing interceptor, so the hot path pays nothing.

The tracer provider is Temporal's replay-safe one (spans made in workflow code are not
duplicated on replay) and the meter provider is wrapped in ``ReplaySafeMeterProvider``
for the same reason. Tests pass in-memory exporters/readers instead of the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
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

from agent_failover.telemetry.names import METER_NAME, TRACER_NAME

TRACE_EXPORTERS = ("console", "otlp", "none")
METRIC_EXPORTERS = ("console", "otlp", "prometheus", "none")
#: Where the Prometheus endpoint listens unless FAILOVER_METRICS_HOST says otherwise.
DEFAULT_METRICS_HOST = "0.0.0.0"
#: Console metrics every minute: more often drowns the logs.
CONSOLE_METRICS_INTERVAL_MS = 60_000


class TelemetryConfigError(ValueError):
    """An ``OTEL_*`` or ``FAILOVER_METRICS_*`` variable has a value we cannot use."""


@dataclass(frozen=True)
class TelemetryConfig:
    """What to export, read from the environment by :meth:`from_env`."""

    traces: str = "none"
    metrics: tuple[str, ...] = ()
    metrics_port: int | None = None
    metrics_host: str = DEFAULT_METRICS_HOST

    @property
    def enabled(self) -> bool:
        return self.traces != "none" or bool(self.metrics)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TelemetryConfig:
        """The configuration the standard variables describe (validated, naming the variable)."""
        env = os.environ if env is None else env
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return cls()
        otlp = bool(
            env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        )
        traces = _names(env, "OTEL_TRACES_EXPORTER", TRACE_EXPORTERS, "otlp" if otlp else "none")
        if len(traces) > 1:
            raise TelemetryConfigError(f"OTEL_TRACES_EXPORTER: one exporter, got {traces!r}")
        otlp_metrics = otlp or bool(env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
        metric_names = _names(
            env, "OTEL_METRICS_EXPORTER", METRIC_EXPORTERS, "otlp" if otlp_metrics else "none"
        )
        port = _port(env.get("FAILOVER_METRICS_PORT", ""))
        if port is not None and "prometheus" not in metric_names:
            metric_names = (*metric_names, "prometheus")
        if "prometheus" in metric_names and port is None:
            raise TelemetryConfigError(
                "OTEL_METRICS_EXPORTER=prometheus needs FAILOVER_METRICS_PORT (e.g. 9464)"
            )
        return cls(
            traces=(traces or ("none",))[0],
            metrics=tuple(n for n in metric_names if n != "none"),
            metrics_port=port,
            metrics_host=env.get("FAILOVER_METRICS_HOST", DEFAULT_METRICS_HOST),
        )


def _names(env: Mapping[str, str], var: str, allowed: Sequence[str], default: str) -> tuple:
    raw = env.get(var, "").strip() or default
    names = tuple(dict.fromkeys(n.strip().lower() for n in raw.split(",") if n.strip()))
    bad = [n for n in names if n not in allowed]
    if bad:
        raise TelemetryConfigError(f"{var}: {', '.join(bad)} not one of {', '.join(allowed)}")
    return names


def _port(raw: str) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    if not raw.isdigit() or not 0 <= int(raw) <= 65535:
        raise TelemetryConfigError(f"FAILOVER_METRICS_PORT: expected a port 0-65535, got {raw!r}")
    return int(raw)


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
