"""Telemetry set-up from the OTEL_* environment; off by default; recording helpers."""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.plugin import FailoverPlugin
from agent_failover.resilience.breaker import BreakerReason, Transition
from agent_failover.resilience.contracts import BreakerState
from agent_failover.telemetry import names, record
from agent_failover.telemetry.config import TelemetryConfig
from agent_failover.telemetry.setup import resource, setup_telemetry, tracing_enabled
from tests.telemetry.conftest import Captured
from tests.telemetry.dashboard import DASHBOARD, dashboard_series


def test_nothing_configured_means_nothing_installed() -> None:
    """No OTEL_* variable: no exporter, no provider, no tracing interceptor on the plugin."""
    config = TelemetryConfig.from_env({})
    assert not config.enabled
    tel = setup_telemetry(config=config)
    assert tel.tracer_provider is None and tel.meter_provider is None
    assert not tracing_enabled()
    assert not trace.get_current_span().is_recording()
    assert FailoverPlugin(DEFAULT_POLICY_PATH, stores="memory").tracing is None


def test_otel_service_name_wins_over_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_SERVICE_NAME names the service; the entry point's name is only a default."""
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "failover-worker-core")
    assert resource("agent-failover-worker").attributes["service.name"] == "failover-worker-core"
    monkeypatch.delenv("OTEL_SERVICE_NAME")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,team=ops")
    assert resource("agent-failover-worker").attributes["service.name"] == "from-attrs"
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES")
    assert resource("agent-failover-worker").attributes["service.name"] == "agent-failover-worker"


def test_tracing_true_without_the_replay_safe_provider_is_an_error() -> None:
    """Asking for tracing with no replay-safe provider fails now, not on every workflow task."""
    with pytest.raises(ValueError, match="replay-safe tracer provider"):
        FailoverPlugin(DEFAULT_POLICY_PATH, stores="memory", tracing=True)


def test_plugin_traces_when_telemetry_is_on(captured: Captured) -> None:
    """With the replay-safe provider installed the plugin adds Temporal's interceptor."""
    assert tracing_enabled()
    assert FailoverPlugin(DEFAULT_POLICY_PATH, stores="memory").tracing is not None
    assert FailoverPlugin(DEFAULT_POLICY_PATH, stores="memory", tracing=False).tracing is None


def _transition(to: BreakerState, frm: BreakerState, at: float) -> Transition:
    return Transition(
        route="r1", from_state=frm, to_state=to, reason=BreakerReason.ERROR_RATE, at=at
    )


def test_restoration_time_and_breaker_gauge(captured: Captured) -> None:
    """Open at t=100, half-open, open again, closed at t=250: one restoration of 150 s
    (from the first opening), and the gauge follows the states."""
    reader: InMemoryMetricReader = captured.reader
    record.breaker_transition(_transition(BreakerState.OPEN, BreakerState.CLOSED, 100.0))
    record.breaker_transition(_transition(BreakerState.HALF_OPEN, BreakerState.OPEN, 130.0))
    record.breaker_transition(_transition(BreakerState.OPEN, BreakerState.HALF_OPEN, 131.0))
    record.breaker_transition(_transition(BreakerState.HALF_OPEN, BreakerState.OPEN, 200.0))
    gauge = _points(reader)[names.BREAKER_STATE]
    assert [(p.attributes["route"], p.value) for p in gauge] == [("r1", 1)]
    record.breaker_transition(_transition(BreakerState.CLOSED, BreakerState.HALF_OPEN, 250.0))
    pts = _points(reader)
    (restored,) = pts[names.RESTORATION_TIME]
    assert (restored.count, restored.sum) == (1, 150.0)
    assert [p.value for p in pts[names.BREAKER_STATE]] == [0]
    assert sum(p.value for p in pts[names.BREAKER_TRANSITIONS]) == 5


def _points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    return {
        m.name: list(m.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }


def test_committed_dashboard_is_the_generator_output_and_reads_our_names() -> None:
    """deploy/grafana/dashboards/failover.json is build_dashboard.py's output, and every
    failover/GenAI series it reads is the Prometheus name of an instrument we declare."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "build_dashboard", DASHBOARD.parents[1] / "build_dashboard.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD.read_text() == module.render()
    declared = {
        getattr(names, n).replace(".", "_")
        for n in dir(names)
        if n.isupper() and isinstance(getattr(names, n), str) and "." in getattr(names, n)
    }
    for series in dashboard_series():
        if series.startswith("temporal_"):
            continue
        assert any(series.startswith(d) for d in declared), series
    board = json.loads(DASHBOARD.read_text())
    titles = {p["title"] for p in board["panels"]}
    for needed in (
        "Substitution rate by role",
        "Degraded-mode rate",
        "Time to restoration",
        "Cascade depth",
        "Semantic validation pass rate",
        "Compensations",
        "Escalations",
        "Per-route latency p50/p95/p99",
        "Per-route time to first chunk",
        "Breaker states over time",
        "Shadow samples and agreement",
        "Quality regressions",
        "Rate-budget refusals",
        "Cost efficiency: tokens per dollar by route",
        "Local saturation",
    ):
        assert needed in titles
