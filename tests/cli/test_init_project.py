"""``failover init DIR``: a small user project whose own test passes, as real processes."""

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

from agent_failover.cli.init_project import FILES, queue_name
from agent_failover.testing.sim.server import RunningSimulator
from tests.cli.conftest import address_of, cli_env, run_cli

#: "Small enough to read in a minute": no generated file is longer than this.
MAX_LINES = 60


async def test_init_writes_a_small_project(tmp_path: Path) -> None:
    """Exit 0; one `wrote` line per file; every file short; the worker and the CLI agree on
    the task queue variable."""
    project = tmp_path / "Support Bot"
    proc = await run_cli(["init", str(project)], cli_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(f"wrote {project / 'policy.yaml'}")
    assert "Traceback" not in proc.stdout + proc.stderr
    for name in FILES:
        lines = (project / name).read_text().count("\n")
        assert 0 < lines <= MAX_LINES, (name, lines)
    worker = (project / "worker.py").read_text()
    assert 'os.environ.get("FAILOVER_TASK_QUEUE", "support-bot")' in worker
    assert queue_name(project) == "support-bot"


async def test_init_refuses_to_overwrite(tmp_path: Path) -> None:
    """A second init into the same directory: exit 2, one line naming the files, --force."""
    await run_cli(["init", str(tmp_path)], cli_env())
    proc = await run_cli(["init", str(tmp_path)], cli_env())
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {tmp_path} already has policy.yaml")
    assert "--force" in lines[0]


def test_the_generated_projects_own_test_passes(tmp_path: Path) -> None:
    """The project's test (simulator + time-skipping server from agent_failover.testing)
    passes with this environment's Python, run from the project's directory."""
    project = tmp_path / "my_app"
    from typer.testing import CliRunner

    from agent_failover.cli.main import app

    assert CliRunner().invoke(app, ["init", str(project)]).exit_code == 0
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SIM_URL")}
    env = {k: v for k, v in env.items() if not k.startswith(("FAILOVER_", "TEMPORAL_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=project, env=env, capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout


@pytest.mark.devserver
async def test_the_generated_worker_and_starter_run_and_drain(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator, tmp_path: Path
) -> None:
    """`python worker.py` says it is ready, `python starter.py` is answered by the primary,
    SIGTERM drains the worker: exit 0 each, nothing on stderr."""
    from typer.testing import CliRunner

    from agent_failover.cli.main import app

    project = tmp_path / "my_app"
    assert CliRunner().invoke(app, ["init", str(project)]).exit_code == 0
    queue = f"init-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env = {k: v for k, v in env.items() if not k.startswith(("FAILOVER_", "TEMPORAL_"))}
    env |= {
        "TEMPORAL_ADDRESS": address_of(dev_env), "SIM_URL": simulator.url,
        "FAILOVER_TASK_QUEUE": queue, "FAILOVER_REDIS_NAMESPACE": f"test-{queue}",
    }  # fmt: skip
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "worker.py", cwd=project, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        line = await asyncio.wait_for(worker.stdout.readline(), 60)
        assert line.decode().strip() == f"worker ready on task queue {queue}"
        starter = await asyncio.to_thread(
            subprocess.run, [sys.executable, "starter.py", "hello"],
            cwd=project, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert starter.returncode == 0, starter.stderr
        assert starter.stdout.splitlines()[0] == "answered by claude-us (tier 0, full)"
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(worker.communicate(), 60)
    assert worker.returncode == 0, err.decode()[-2000:]
    assert err.decode().strip() == ""
