"""``python worker.py`` SIGKILLed with every half-open trial slot of the primary taken by
its calls: once the primary is healed, the replacement worker's health monitor closes the
breaker within two probe intervals (the dead worker's slots never block its probes, and
lapse on their own)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.contracts import BreakerState, CallOutcome
from agent_failover.resilience.errors import ErrorClass
from agent_failover.stores.factory import DEFAULT_REDIS_URL
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from agent_failover.testing.procs import worker_env
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import RunningSimulator
from agent_failover.workflows.models import PipelineInput
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id
from agent_failover.workflows.pipeline import AgentPipelineWorkflow

pytestmark = pytest.mark.devserver
ROOT = Path(__file__).resolve().parents[1]
PRIMARY = "anthropic-us-east"
#: The test policy's probe cadence (also for half-open routes), in seconds.
PROBE_INTERVAL_S = 3.0
MAX_TRIALS = 2


def _policy(tmp_path: Path) -> Path:
    """The demo policy with a short probe interval, every call a trial of a half-open
    route (at most MAX_TRIALS at once), and one good trial or probe closing it. The trial
    leases outlive the test (a long grace), so closing it is the probes' doing, not the
    leases lapsing (which the store tests cover on an injected clock)."""
    doc = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    doc["probes"] |= {"interval_s": PROBE_INTERVAL_S, "half_open_interval_s": PROBE_INTERVAL_S}
    doc["breaker"] |= {
        "half_open_max_trials": MAX_TRIALS,
        "half_open_call_fraction": 1.0,
        "close_after_consecutive_successes": 1,
        "trial_lease_grace_s": 120,
    }
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


async def _start_worker(
    dev_env: WorkflowEnvironment, sim: RunningSimulator, tq: str, policy: Path
) -> asyncio.subprocess.Process:
    address = dev_env.client.service_client.config.target_host
    env = worker_env(address=address, sim_url=sim.url, task_queue=tq, policy=policy)
    return await asyncio.create_subprocess_exec(
        sys.executable, "worker.py", cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


async def _until(check, timeout_s: float, what: str, step_s: float = 0.05):
    """Poll ``check`` until it returns a truthy value; fail naming ``what`` at the bound."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = await check()
        if got:
            return got
        await asyncio.sleep(step_s)
    raise AssertionError(f"{what}: not within {timeout_s:g}s")


async def _monitor_rounds(dev_env: WorkflowEnvironment, tq: str) -> int:
    try:
        table = await dev_env.client.get_workflow_handle(monitor_workflow_id(tq)).query(
            HealthMonitorWorkflow.health
        )
    except Exception:  # not started yet, or its worker is gone: no round to count
        return 0
    return table.rounds


async def _half_open_with_slots_taken(store: RedisHealthStore, settings, now: float) -> None:
    """The primary's breaker open past its open duration (its next admission makes it
    half-open), and its last probe stamped ahead, so the monitor leaves it to the calls
    until their trials are in flight (a probe then would decide it before the kill)."""
    tripped = now - settings.open_duration_s - 60
    auth = CallOutcome(route=PRIMARY, at=tripped, ok=False, error_class=ErrorClass.AUTH)
    await store.record(auth, settings)
    stamp = CallOutcome(
        route=PRIMARY, at=now + PROBE_INTERVAL_S, ok=False,
        error_class=ErrorClass.SERVER_ERROR, probe=True,
    )  # fmt: skip
    await store.record(stamp, settings)
    assert (await store.breaker(PRIMARY)).state is BreakerState.OPEN


async def test_sigkilled_worker_with_every_trial_in_flight_leaves_no_slot_behind(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator, sim_admin: SimAdmin, tmp_path
) -> None:
    """SIGKILL the worker while its calls hold every half-open trial slot of the primary,
    heal the primary, start a replacement: the breaker is closed within two probe
    intervals of the replacement's monitor probing again."""
    tq = f"lease-{uuid.uuid4().hex[:8]}"
    policy_path = _policy(tmp_path)
    settings = load_policy(policy_path, env={"SIM_URL": simulator.url}).trial_settings(PRIMARY)
    store = RedisHealthStore(
        fail_fast_client(os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)), namespace=tq
    )
    first = await _start_worker(dev_env, simulator, tq, policy_path)
    second = None
    handles: list[WorkflowHandle] = []
    try:
        await _until(lambda: _monitor_rounds(dev_env, tq), 60, "first worker's monitor")
        # Slow tokens: the first comes within the TTFT budget, the answer takes longer
        # than the test needs, so the trials stay on the wire until the kill.
        await sim_admin.set_faults(PRIMARY, [{"kind": "tokens_per_sec", "rate": 1.0}])
        await _half_open_with_slots_taken(store, settings, time.time())
        handles = [
            await dev_env.client.start_workflow(
                AgentPipelineWorkflow.run,
                PipelineInput(task=f"trial {i}"),
                id=f"{tq}-{i}",
                task_queue=tq,
            )
            for i in range(MAX_TRIALS + 1)
        ]

        async def on_the_wire() -> bool:
            rows = await sim_admin.attempts(endpoint=PRIMARY)
            return sum(r.duration_s is None for r in rows) >= MAX_TRIALS

        await _until(on_the_wire, 30, f"{MAX_TRIALS} trials on the wire to the primary")
        held = await store.breaker(PRIMARY)
        assert held.state is BreakerState.HALF_OPEN, held
        rounds = await _monitor_rounds(dev_env, tq)
        first.send_signal(signal.SIGKILL)
        await first.wait()
        killed_at = time.time()
        for h in handles:
            await h.terminate()
        await sim_admin.clear(PRIMARY)  # healed

        second = await _start_worker(dev_env, simulator, tq, policy_path)
        await _until(lambda: _gt(_monitor_rounds(dev_env, tq), rounds), 60, "a replacement round")
        probing_at = time.time()

        seen: list[str] = []

        async def closed() -> bool:
            b = await store.breaker(PRIMARY)
            seen.append(_state_line(b, killed_at))
            return b.state is BreakerState.CLOSED

        try:
            await _until(closed, 2 * PROBE_INTERVAL_S, "breaker closed", step_s=0.5)
        except AssertionError:
            table = await dev_env.client.get_workflow_handle(monitor_workflow_id(tq)).query(
                HealthMonitorWorkflow.health
            )
            raise AssertionError(
                f"not closed within {2 * PROBE_INTERVAL_S:g}s of the replacement's monitor "
                f"probing ({probing_at - killed_at:.1f}s after the SIGKILL); "
                f"last probe of the primary: {table.results.get(PRIMARY)!r}; "
                f"breaker after the kill: {'; '.join(seen)}"
            ) from None
        print(f"\nbreaker after the kill: {'; '.join(seen)}")
    finally:
        for proc in (first, second):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
        for h in handles:
            with _suppressed():
                await h.terminate()
        with _suppressed():
            await dev_env.client.get_workflow_handle(monitor_workflow_id(tq)).terminate()
        await store.close()


def _state_line(b, killed_at: float) -> str:
    """``+12.3s half_open (open_duration_elapsed), trial slots held: 2``."""
    now = time.time()
    held = b.model_dump().get("trials_in_flight")  # a bare count (before leases)
    if held is None:
        held = len([x for x in b.trial_leases if x.expires_at > now])
    reason = b.reason.value if b.reason else "-"
    return f"+{now - killed_at:.1f}s {b.state.value} ({reason}), trial slots held: {held}"


async def _gt(value, than: int) -> bool:
    return (await value) > than


def _suppressed():
    import contextlib

    return contextlib.suppress(Exception)
