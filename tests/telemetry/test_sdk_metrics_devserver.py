"""Temporal's own SDK metrics reach the same meter provider as ours."""

from __future__ import annotations

import uuid

import httpx
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.runtime import TelemetryConfig as RuntimeTelemetry
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.telemetry.sdk import export_sdk_metrics, sdk_metrics_buffer
from agent_failover.telemetry.setup import setup_telemetry
from agent_failover.testing.harness import build_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from tests.telemetry.conftest import SCRAPE_CONFIG
from tests.telemetry.dashboard import dashboard_series, served_series
from tests.workflows.helpers import CallInput, ResilientCallWorkflow

pytestmark = pytest.mark.devserver


async def test_sdk_metrics_are_exported_beside_ours(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """A client on a runtime with our metric buffer: after one call, the SDK's workflow
    and activity metrics are in the reader next to the failover ones, and the scrape
    endpoint serves the Temporal series the dashboard reads."""
    reader = InMemoryMetricReader()
    tel = setup_telemetry("sdk-test", config=SCRAPE_CONFIG, metric_readers=[reader])
    try:
        buffer = sdk_metrics_buffer(tel)
        assert buffer is not None
        runtime = Runtime(telemetry=RuntimeTelemetry(metrics=buffer))
        target = dev_env.client.service_client.config.target_host
        async with export_sdk_metrics(tel, buffer):
            client = await Client.connect(
                target, runtime=runtime, data_converter=dev_env.client.data_converter
            )
            h, workers = build_harness(client, policy)
            async with running(workers):
                request = ChatRequest(messages=[Message(role="user", content="hi")], max_tokens=40)
                await client.execute_workflow(
                    ResilientCallWorkflow.run,
                    CallInput(role="plain", request=request),
                    id=f"call-{uuid.uuid4().hex[:10]}",
                    task_queue=h.task_queue,
                    result_type=AgentOutput,
                )
        data = reader.get_metrics_data()
        found = {
            m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
        }
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{tel.metrics_port}/metrics")).text
        served = served_series(text)
        assert {s for s in dashboard_series() if s.startswith("temporal_")} <= served
        assert "temporal_workflow_completed" in found
        assert "temporal_activity_execution_latency" in found
        assert "failover.answers" in found
    finally:
        tel.shutdown()
