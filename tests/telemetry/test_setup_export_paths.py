"""The OTLP collector path over HTTP on loopback, and replay with tracing on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from temporalio.client import WorkflowHistory
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agent_failover.service import workflow_runner
from agent_failover.telemetry.config import TelemetryConfig
from agent_failover.telemetry.setup import setup_telemetry, tracer
from agent_failover.telemetry.spans import event
from tests.telemetry.conftest import Captured
from tests.workflows.test_patches_replay import REPLAY_WORKFLOWS, fresh_worker_policies

HISTORIES = sorted((Path(__file__).resolve().parents[1] / "histories").glob("*.json"))


async def test_spans_reach_an_otlp_collector_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT alone sends spans (with their events and the service
    name from OTEL_SERVICE_NAME) to a collector's /v1/traces as OTLP protobuf."""
    received: list[ExportTraceServiceRequest] = []

    async def traces(request: web.Request) -> web.Response:
        body = ExportTraceServiceRequest()
        body.ParseFromString(await request.read())
        received.append(body)
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    monkeypatch.setenv("OTEL_SERVICE_NAME", "failover-worker-core")
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_METRICS_EXPORTER": "none",
    }
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    tel = setup_telemetry("agent-failover-worker", config=TelemetryConfig.from_env(env))
    try:
        with tracer().start_as_current_span("chat claude-sonnet-4-5"):
            event("failover.substitution", {"failover.from": "a", "failover.to": "b"})
        # The batch processor's flush blocks on the HTTP post: off the event loop.
        await asyncio.to_thread(tel.tracer_provider.force_flush)
    finally:
        tel.shutdown()
        await runner.cleanup()
    spans = [
        (rs, s)
        for req in received
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    assert [s.name for _, s in spans] == ["chat claude-sonnet-4-5"]
    rs, span = spans[0]
    service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
    assert service == "failover-worker-core"
    assert [e.name for e in span.events] == ["failover.substitution"]


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_replay_with_tracing_is_deterministic_and_silent(
    path: Path, captured: Captured
) -> None:
    """With the tracing interceptor and our spans on, the committed histories replay
    without non-determinism, and replaying exports no attempt or call span again."""
    await fresh_worker_policies()  # as in a fresh worker: its policy store's versions only
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))  # noqa: ASYNC240
    replayer = Replayer(
        workflows=REPLAY_WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
        interceptors=[OpenTelemetryInterceptor(add_temporal_spans=True)],
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
    ours = [
        s.name
        for s in captured.spans.get_finished_spans()
        if s.name.startswith(("chat ", "invoke_agent "))
    ]
    assert ours == []
