"""The worker's Prometheus scrape endpoint (``FAILOVER_METRICS_PORT``).

The ``[prometheus]`` extra (``opentelemetry-exporter-prometheus``) turns the OpenTelemetry
metrics into Prometheus' text format; a small threaded HTTP server from
``prometheus_client`` serves ``/metrics`` on the port (0 picks a free one, for tests).
"""

from __future__ import annotations

from typing import Any

from agent_failover.telemetry.config import TelemetryConfigError


def prometheus_reader(registry: Any) -> Any:
    """An OpenTelemetry metric reader collected into ``registry`` (a ``prometheus_client``
    ``CollectorRegistry``: one per setup, so a second setup in one process cannot clash)."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
    except ImportError as exc:
        raise TelemetryConfigError(
            "the Prometheus endpoint needs the [prometheus] extra: "
            "pip install 'agent-failover[prometheus]'"
        ) from exc
    return PrometheusMetricReader(registry=registry)


def new_registry() -> Any:
    """A fresh ``prometheus_client`` registry (None when the extra is missing)."""
    try:
        from prometheus_client import CollectorRegistry
    except ImportError:
        return None
    return CollectorRegistry(auto_describe=True)


def serve_metrics(host: str, port: int, registry: Any) -> Any:
    """Serve ``registry`` on ``host:port`` in a daemon thread; returns the server
    (``server_port`` is the bound port, ``shutdown()`` stops it)."""
    from prometheus_client import start_http_server

    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise TelemetryConfigError(
            f"FAILOVER_METRICS_PORT: cannot listen on {host}:{port} ({exc})"
        ) from exc
    return server
