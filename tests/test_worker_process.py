"""``python worker.py`` as a real process: bad policy → exit 2; good policy → serves
pipelines, starts its health monitor, and drains on SIGTERM with exit 0. And ``failover
run`` / ``failover status`` against it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from agent_failover.cli.main import app
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.testing.sim.server import RunningSimulator
from agent_failover.workflows.models import PipelineInput, PipelineResult
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id
from agent_failover.workflows.pipeline import AgentPipelineWorkflow

pytestmark = pytest.mark.devserver
ROOT = Path(__file__).resolve().parents[1]


def _env(dev_env: WorkflowEnvironment, sim: RunningSimulator, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "SIM_URL": sim.url,
        "LOG_LEVEL": "WARNING",
        "FAILOVER_POLICY": str(DEFAULT_POLICY_PATH),
        **extra,
    }


def _one_line_error(proc: subprocess.CompletedProcess[str], code: int, starts: str) -> None:
    """Exit ``code``, stderr's first line starts with ``starts``, no traceback anywhere."""
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.splitlines()[0].startswith(starts), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_no_policy_exits_2_saying_how_to_name_one() -> None:
    """No ``FAILOVER_POLICY``: not the demo policy, but exit 2 and how to point at one."""
    env = {k: v for k, v in os.environ.items() if k != "FAILOVER_POLICY"}
    proc = subprocess.run(
        [sys.executable, "worker.py"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    _one_line_error(proc, 2, "error: no policy: set FAILOVER_POLICY")
    assert "failover dev" in proc.stderr.splitlines()[0]


async def test_unreachable_redis_exits_1_in_one_line(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator
) -> None:
    """An explicit ``REDIS_URL`` nobody answers: exit 1 naming it, never an embedded Redis."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"redis://127.0.0.1:{s.getsockname()[1]}/0"
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "worker.py"], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env=_env(dev_env, simulator, REDIS_URL=dead, FAILOVER_REDIS_UNREACHABLE=""),
    )  # fmt: skip
    _one_line_error(proc, 1, f"error: Redis at {dead} (REDIS_URL) is not reachable")


async def test_bad_policy_exits_2_naming_the_field(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator, tmp_path: Path
) -> None:
    """A policy with an unknown roster endpoint stops the worker at start-up with exit 2."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        DEFAULT_POLICY_PATH.read_text().replace("tier0: [anthropic-us-east]", "tier0: [nope]", 1)
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        cwd=ROOT,
        env=_env(dev_env, simulator, FAILOVER_POLICY=str(bad)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert "roles.planner.roster.tier0[0]" in err.decode() and "nope" in err.decode()


async def test_worker_serves_pipelines_and_drains_on_sigterm(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator, sim_admin
) -> None:
    """The worker process runs a pipeline end to end, its monitor probes, SIGTERM → exit 0."""
    tq = f"proc-{uuid.uuid4().hex[:8]}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        cwd=ROOT,
        env=_env(dev_env, simulator, FAILOVER_TASK_QUEUE=tq, FAILOVER_REDIS_NAMESPACE=tq),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    client = dev_env.client
    try:
        result: PipelineResult = await asyncio.wait_for(
            client.execute_workflow(
                AgentPipelineWorkflow.run,
                PipelineInput(task="worker process test"),
                id=f"proc-{uuid.uuid4().hex[:8]}",
                task_queue=tq,
                result_type=PipelineResult,
            ),
            90,
        )
        assert result.answer and result.summary.worst_tier == 0
        monitor = client.get_workflow_handle(monitor_workflow_id(tq))
        for _ in range(100):
            table = await monitor.query(HealthMonitorWorkflow.health)
            if table.rounds >= 1 and table.table is not None:
                break
            await asyncio.sleep(0.1)
        assert table.rounds >= 1 and set(table.results) == {
            "anthropic-us-east",
            "anthropic-eu-west",
            "bedrock-us-west-2",
            "vertex-europe-west1",
            "openai-us",
            "cheap-mini",
            "gemini-flash",
        }
        runner = CliRunner()
        address = _env(dev_env, simulator)["TEMPORAL_ADDRESS"]
        run = await asyncio.to_thread(
            runner.invoke,
            app,
            ["run", "Compare two caches", "--address", address, "--task-queue", tq],
        )
        assert run.exit_code == 0, run.output
        assert "[echo:" in run.output and "synthesis" in run.output
        assert "/namespaces/default/workflows/pipeline-" in run.output
        status = await asyncio.to_thread(
            runner.invoke,
            app,
            ["status", "--address", address, "--task-queue", tq],
        )  # fmt: skip
        assert status.exit_code == 0, status.output
        assert "anthropic-us-east" in status.output and "closed" in status.output
        direct = await asyncio.to_thread(
            runner.invoke,
            app,
            ["status", "--from-store", "--namespace", tq, "--policy", str(DEFAULT_POLICY_PATH)],
        )
        assert direct.exit_code == 0, direct.output
        assert "gemini-flash" in direct.output
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await client.get_workflow_handle(monitor_workflow_id(tq)).terminate()


async def _call_model_started(handle) -> bool:
    """Whether a model call is running: a ``call_model``, or the ``first_call`` that runs
    a call's first attempt."""
    from temporalio.api.enums.v1 import PendingActivityState

    desc = await handle.describe()
    return any(
        a.activity_type.name in ("call_model", "first_call")
        and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        for a in desc.raw_description.pending_activities
    )


@pytest.mark.parametrize(("grace", "completed"), [("20", 1), ("0", 0)], ids=["grace", "no-grace"])
async def test_sigterm_drains_in_flight_activities_for_the_grace_period(
    dev_env: WorkflowEnvironment,
    simulator: RunningSimulator,
    sim_admin,
    grace: str,
    completed: int,
) -> None:
    """SIGTERM stops polling but lets a running model call finish within
    FAILOVER_SHUTDOWN_GRACE_S (its result reaches history); with 0 it is cut off."""
    from temporalio.api.enums.v1 import EventType

    from tests.chaos.helpers import eventually

    await sim_admin.set_faults("anthropic-us-east", [{"kind": "latency", "seconds": 1.5}])
    tq = f"drain-{uuid.uuid4().hex[:8]}"
    env = _env(
        dev_env,
        simulator,
        FAILOVER_TASK_QUEUE=tq,
        FAILOVER_REDIS_NAMESPACE=tq,
        FAILOVER_SHUTDOWN_GRACE_S=grace,
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "worker.py", cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    client = dev_env.client
    handle = await client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="drain me"),
        id=f"drain-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
    )
    try:
        await eventually(lambda: _call_model_started(handle), timeout_s=60)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        events = (await handle.fetch_history()).events
        done = [e for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
        assert len(done) == completed
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await handle.terminate()
        await client.get_workflow_handle(monitor_workflow_id(tq)).terminate()
