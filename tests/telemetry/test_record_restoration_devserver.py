"""Time to restoration on the dev server: a primary breaker opened by real calls and closed
again by the health monitor's probes is one point of ``failover.restoration.duration``,
served on the scrape endpoint and read back by ``failover report``."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent_failover.cli.report_fetch import fetch_breakers
from agent_failover.supervisor import ensure_monitor
from agent_failover.telemetry import names
from agent_failover.testing.harness import Harness
from agent_failover.testing.sim.admin import SimAdmin
from tests.telemetry.conftest import Captured
from tests.telemetry.test_record_metrics_devserver import points

pytestmark = pytest.mark.devserver
PRIMARY = "anthropic-us-east"
#: Demo policy: probes every 3 s, half-open every 0.75 s, three good ones close it.
CLOSE_WITHIN_S = 30.0


async def test_restoration_series_after_the_monitor_closes_the_primary(
    traced: Harness, sim_admin: SimAdmin, captured: Captured
) -> None:
    await sim_admin.set_faults(PRIMARY, [{"kind": "auth_error"}])  # opens on the first one
    assert (await traced.call(max_tokens=80)).tier == 1
    opened = time.monotonic()
    await sim_admin.set_faults(PRIMARY, [])
    monitor = await ensure_monitor(traced.client, traced.policy, task_queue=traced.task_queue)
    try:
        state = "open"
        while state != "closed" and time.monotonic() - opened < CLOSE_WITHIN_S:
            await asyncio.sleep(0.5)
            state = (await traced.health.breaker(PRIMARY)).state.value
        took = time.monotonic() - opened
    finally:
        await monitor.terminate()
    assert state == "closed", f"still {state} after {CLOSE_WITHIN_S} s"
    (point,) = [
        p for p in points(captured)[names.RESTORATION_TIME] if p.attributes["route"] == PRIMARY
    ]
    assert point.count == 1 and 0 < point.sum <= took + 1
    port = captured.telemetry.metrics_port
    rows = {r[0]: r for r in await fetch_breakers(f"http://127.0.0.1:{port}/metrics")}
    assert rows[PRIMARY][1] == "closed" and rows[PRIMARY][2].endswith("s")
