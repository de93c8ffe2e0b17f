"""What the ``OTEL_*`` and ``FAILOVER_METRICS_*`` environment asks telemetry to export.

:meth:`TelemetryConfig.from_env` reads ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``
(``console``, ``otlp``, ``none``; metrics also ``prometheus``), the OTLP endpoints (an
endpoint alone turns OTLP on), ``OTEL_SDK_DISABLED`` and ``FAILOVER_METRICS_PORT`` /
``FAILOVER_METRICS_HOST`` (a Prometheus scrape endpoint), and rejects a value it cannot
use with :class:`TelemetryConfigError` naming the variable. A value, no side effects:
:func:`agent_failover.telemetry.setup.setup_telemetry` installs what it describes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TRACE_EXPORTERS = ("console", "otlp", "none")
METRIC_EXPORTERS = ("console", "otlp", "prometheus", "none")
#: Where the Prometheus endpoint listens unless FAILOVER_METRICS_HOST says otherwise.
DEFAULT_METRICS_HOST = "0.0.0.0"


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
