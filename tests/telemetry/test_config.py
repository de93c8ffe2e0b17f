"""What the OTEL_* and FAILOVER_METRICS_* environment asks to export, validated."""

from __future__ import annotations

import pytest

from agent_failover.telemetry.config import TelemetryConfig, TelemetryConfigError


@pytest.mark.parametrize(
    ("env", "traces", "metrics", "port"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "otlp", ("otlp",), None),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console", (), None),
        ({"FAILOVER_METRICS_PORT": "9464"}, "none", ("prometheus",), 9464),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "prometheus",
             "FAILOVER_METRICS_PORT": "9464"},
            "otlp", ("prometheus",), 9464,
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_SDK_DISABLED": "true"}, "none", (), None),
    ],
)  # fmt: skip
def test_config_from_the_standard_variables(env, traces, metrics, port) -> None:
    """The exporters follow OTEL_*: an OTLP endpoint alone turns OTLP on, the metrics port
    adds the scrape endpoint, OTEL_SDK_DISABLED wins."""
    config = TelemetryConfig.from_env(env)
    assert (config.traces, config.metrics, config.metrics_port) == (traces, metrics, port)


@pytest.mark.parametrize(
    ("env", "names_var"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER"),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "OTEL_TRACES_EXPORTER"),
        ({"OTEL_METRICS_EXPORTER": "prometheus"}, "FAILOVER_METRICS_PORT"),
        ({"FAILOVER_METRICS_PORT": "ninety"}, "FAILOVER_METRICS_PORT"),
        ({"FAILOVER_METRICS_PORT": "70000"}, "FAILOVER_METRICS_PORT"),
    ],
)
def test_bad_values_name_the_variable(env, names_var) -> None:
    """A value we cannot use fails at start-up, naming the variable."""
    with pytest.raises(TelemetryConfigError, match=names_var):
        TelemetryConfig.from_env(env)
