"""The example user project (its own ``workflows``, ``activities``, ``config``, ``cli`` and
``providers`` packages) runs a failover end to end through ``FailoverPlugin``, as real
processes from a directory outside the repository, on the dev server and the simulator."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.testing.sim import SimAdmin
from agent_failover.testing.sim.server import RunningSimulator

pytestmark = pytest.mark.devserver
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_triage"


def _project(tmp_path: Path) -> Path:
    """A copy of the example plus two more packages whose names we must not shadow."""
    project = tmp_path / "support_triage"
    shutil.copytree(EXAMPLE, project)
    for pkg in ("cli", "providers"):
        (project / pkg).mkdir()
        (project / pkg / "__init__.py").write_text(f"OWNER = 'user {pkg}'\n")
    return project


def _env(dev_env: WorkflowEnvironment, sim: RunningSimulator, queue: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FAILOVER_POLICY")}
    return {
        **env,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "SIM_URL": sim.url,
        "TRIAGE_TASK_QUEUE": queue,
        "FAILOVER_REDIS_NAMESPACE": f"test-example-{queue}",
    }


async def _start_worker(project: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "worker.py", cwd=project, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    if b"worker ready" not in line:
        _, err = await proc.communicate()
        pytest.fail(f"example worker did not start: {line!r}\n{err.decode()[-3000:]}")
    return proc


async def _run_starter(project: Path, env: dict[str, str]) -> tuple[dict, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "starter.py", "ent-42", "Checkout returns 500 for EU customers",
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()[-3000:]
    text = out.decode()
    return json.loads(text.strip().splitlines()[-1]), text


async def test_user_project_fails_over_to_the_standby(
    dev_env: WorkflowEnvironment,
    simulator: RunningSimulator,
    sim_admin: SimAdmin,
    tmp_path: Path,
) -> None:
    """Primary region overloaded: the user's workflow gets a tier-1 answer, the 529 on record."""
    project = _project(tmp_path)
    env = _env(dev_env, simulator, f"triage-{uuid.uuid4().hex[:8]}")
    await sim_admin.set_faults("anthropic-us-east", [{"kind": "overloaded"}])
    worker = await _start_worker(project, env)
    try:
        result, printed = await _run_starter(project, env)
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)
    answer = result["answer"]
    assert answer["tier"] == 1 and answer["route"] in ("claude-eu", "gpt-us")
    assert answer["capability"] == "full"
    first = answer["attempts"][0]
    assert first["route"] == "claude-us" and first["outcome"] == "overloaded"
    assert first["http_status"] == 529
    assert result["severity"] in ("low", "medium", "high")
    assert result["customer"]["plan"] == "enterprise"  # the user's own activity ran
    assert "answered by" in printed and "HTTP 529" in printed


async def test_user_packages_shadow_nothing_of_ours(tmp_path: Path) -> None:
    """From the user project, ``workflows``/``config``/``cli``/``providers`` are the user's,
    and agent_failover's internals still import (they never use bare top-level names)."""
    project = _project(tmp_path)
    code = (
        "import workflows, activities, config, cli, providers, agent_failover;"
        "import agent_failover.plugin, agent_failover.cli.main, agent_failover.service;"
        "assert hasattr(workflows, 'TriageWorkflow') and hasattr(config, 'TASK_QUEUE');"
        "assert cli.OWNER == 'user cli' and providers.OWNER == 'user providers';"
        "print(agent_failover.FailoverPlugin.__module__)"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, cwd=project,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "agent_failover.plugin"
