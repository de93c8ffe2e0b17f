"""Temporal's own SDK metrics (workflow/activity task latencies, slots, polls...) through
the same OpenTelemetry pipeline as ours, so one scrape endpoint serves both.

The Temporal runtime writes them into a ``MetricBuffer`` that must exist before the
first client connects (:func:`sdk_metrics_buffer`, handed to
:func:`agent_failover.logs.forward_core_logs`); :func:`export_sdk_metrics` drains it
into the installed meter provider for as long as the process runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from agent_failover.telemetry.setup import Telemetry

#: Updates the buffer holds between drains (drained every second).
SDK_METRIC_BUFFER_SIZE = 50_000


def sdk_metrics_buffer(telemetry: Telemetry) -> Any:
    """A buffer for the Temporal runtime when metrics are exported, else None."""
    if telemetry.meter_provider is None:
        return None
    from temporalio.runtime import MetricBuffer, MetricBufferDurationFormat

    return MetricBuffer(SDK_METRIC_BUFFER_SIZE, MetricBufferDurationFormat.SECONDS)


@asynccontextmanager
async def export_sdk_metrics(telemetry: Telemetry, buffer: Any) -> AsyncIterator[None]:
    """Drain ``buffer`` into the telemetry's meter provider while the block runs."""
    if buffer is None or telemetry.meter_provider is None:
        yield
        return
    from temporalio.contrib.opentelemetry import MetricsExporter

    exporter = MetricsExporter(buffer, telemetry.meter_provider)
    task = asyncio.create_task(exporter.run())
    try:
        yield
    finally:
        await exporter.shutdown()
        await asyncio.gather(task, return_exceptions=True)
