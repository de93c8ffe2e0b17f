"""The worker process's Prometheus endpoint (FAILOVER_METRICS_PORT), scraped over HTTP."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.testing.sim.server import RunningSimulator

pytestmark = pytest.mark.devserver
ROOT = Path(__file__).resolve().parents[2]
FAILOVER = str(Path(sys.executable).parent / "failover")
#: The endpoint must serve the SDK's worker metrics within this long of the process start.
READY_BOUND_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", [["worker.py"], ["failover", "worker"]], ids=["py", "cli"])
async def test_worker_serves_failover_and_temporal_metrics(
    dev_env: WorkflowEnvironment,
    simulator: RunningSimulator,
    redis_url: str,
    tmp_path: Path,
    command: list[str],
) -> None:
    """`python worker.py` and `failover worker` with FAILOVER_METRICS_PORT serve /metrics
    on 127.0.0.1: the Temporal SDK's worker series (pollers, slots) beside ours (breaker
    states from the monitor's probes), named by OTEL_SERVICE_NAME."""
    port = _free_port()
    tq = f"metrics-{uuid.uuid4().hex[:8]}"
    env = {
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "SIM_URL": simulator.url,
        "FAILOVER_POLICY": str(DEFAULT_POLICY_PATH),
        "REDIS_URL": redis_url,
        "FAILOVER_REDIS_NAMESPACE": tq,
        "FAILOVER_TASK_QUEUE": tq,
        "FAILOVER_METRICS_PORT": str(port),
        "FAILOVER_METRICS_HOST": "127.0.0.1",
        "OTEL_SERVICE_NAME": "failover-worker-test",
        "LOG_LEVEL": "INFO",
    }
    argv = [sys.executable, "worker.py"] if command == ["worker.py"] else [FAILOVER, "worker"]
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=out
        )
    try:
        text = await _scrape_until(port, ("temporal_num_pollers", "failover_breaker_state"))
        assert "target_info{" in text and 'service_name="failover-worker-test"' in text
        assert "failover_probes_total" in text
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 60)
    assert proc.returncode == 0, log.read_text()[-3000:]


async def _scrape_until(port: int, series: tuple[str, ...]) -> str:
    """Poll the endpoint until every series shows (the worker is starting up)."""
    deadline = time.monotonic() + READY_BOUND_S
    text = ""
    async with httpx.AsyncClient(timeout=2) as http:
        while time.monotonic() < deadline:
            try:
                text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            except httpx.TransportError:
                text = ""
            if all(f"\n{s}" in text for s in series):
                return text
            await asyncio.sleep(0.5)
    raise AssertionError(f"/metrics never served {series}; last scrape:\n{text[-2000:]}")
