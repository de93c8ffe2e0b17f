"""``failover init DIR``: a small user project whose own test passes, as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent_failover.cli.init_project import FILES, queue_name
from tests.cli.conftest import cli_env, run_cli

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
