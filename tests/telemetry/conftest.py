"""Fixtures for the telemetry tests: in-memory exporters installed through the real
``setup_telemetry`` path, and the global providers put back afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agent_failover.connect import tracing_interceptors
from agent_failover.resilience.config import PolicyConfig
from agent_failover.telemetry.config import TelemetryConfig
from agent_failover.telemetry.instruments import reset_breaker_states
from agent_failover.telemetry.setup import Telemetry, setup_telemetry
from agent_failover.testing.harness import Harness, build_harness, running
from agent_failover.testing.sim.admin import SimAdmin


@dataclass
class Captured:
    """What one test's telemetry produced."""

    telemetry: Telemetry
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader


#: The Prometheus endpoint of the tests: loopback, a free port.
SCRAPE_CONFIG = TelemetryConfig(metrics=("prometheus",), metrics_port=0, metrics_host="127.0.0.1")


@pytest.fixture
def captured() -> Iterator[Captured]:
    """Tracing and metrics on (in memory, plus the Prometheus endpoint on 127.0.0.1),
    off again after the test."""
    reset_breaker_states()
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tel = setup_telemetry(
        "telemetry-test", config=SCRAPE_CONFIG, span_exporter=spans, metric_readers=[reader]
    )
    try:
        yield Captured(tel, spans, reader)
    finally:
        tel.shutdown()
        reset_breaker_states()


@pytest_asyncio.fixture
async def traced(
    captured: Captured, dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    """A worker whose plugin traces, on a client that traces too (what ``connect_client``
    gives when tracing is on): the workflow start is the root of the trace."""
    client = Client(**{**dev_env.client.config(), "interceptors": tracing_interceptors()})
    h, workers = build_harness(client, policy)
    async with running(workers):
        yield h
