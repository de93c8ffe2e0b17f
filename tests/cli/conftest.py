"""Helpers for the CLI tier: invoke commands in-process (off the event loop), run them as
real processes, and check that a failure is exactly one ``error:`` line."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner, Result

from agent_failover import logs
from agent_failover.cli.main import app
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.resilience.config import PolicyConfig
from agent_failover.testing.harness import Harness, make_harness, running
from agent_failover.workflows.models import MonitorInput
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id

ROOT = Path(__file__).resolve().parents[2]
FAILOVER = str(Path(sys.executable).parent / "failover")
#: A command that should answer "within 5 s" gets this long before the test calls it hung.
ANSWER_BOUND_S = 20.0


class _CommandOnlyStderrHandler(logs.StderrHandler):
    """The in-process command's log handler: it leaves out the records of the test's own
    worker, which runs in this process's main thread (the command runs in another).

    In production a worker is another process, and its log lines never reach a command's
    stderr; in-process they would: the command's handler sits on the root logger and writes
    to ``sys.stderr``, which the runner swaps for the whole process. A breaker warning of
    the test's worker then made the command's "one error line" two.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != threading.main_thread().ident and bool(super().filter(record))


@contextlib.contextmanager
def _command_logging_only() -> Iterator[None]:
    """For one in-process command: its handler ignores the test worker's records, and the
    root logger's handlers are put back afterwards (the command replaces them)."""
    root = logging.getLogger()
    saved = root.handlers[:]
    original = logs.StderrHandler
    logs.StderrHandler = _CommandOnlyStderrHandler  # type: ignore[misc]
    try:
        yield
    finally:
        logs.StderrHandler = original  # type: ignore[misc]
        root.handlers[:] = saved


async def invoke(args: list[str], env: dict[str, str] | None = None) -> Result:
    """Run ``failover ARGS`` in-process (in a thread: commands run their own event loop);
    only the command's own log records reach its stderr (see :class:`_CommandOnlyStderrHandler`)."""
    runner = CliRunner()
    with _command_logging_only():
        return await asyncio.wait_for(
            asyncio.to_thread(runner.invoke, app, args, env=env), ANSWER_BOUND_S
        )


def assert_one_line_error(result: Result, code: int, *fragments: str) -> str:
    """Exit ``code``, one ``error: ...`` line on stderr holding every fragment, no
    traceback anywhere (stdout may say what was done before, e.g. `started <id>`)."""
    out = result.output
    assert result.exit_code == code, out
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in out
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out
    assert lines[0].startswith("error: "), out
    for f in fragments:
        assert f in lines[0], out
    return lines[0]


def address_of(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


@dataclass
class Deployment:
    """A worker (in-process) with its health monitor on a fresh task queue."""

    harness: Harness
    address: str

    @property
    def task_queue(self) -> str:
        return self.harness.task_queue

    def args(self) -> list[str]:
        return ["--address", self.address, "--task-queue", self.task_queue]


@pytest_asyncio.fixture
async def deployment(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin
) -> AsyncIterator[Deployment]:
    """Workers plus a running monitor (no supervisor: a terminated monitor stays down)."""
    h, workers = await make_harness(dev_env.client, policy)
    async with running(workers):
        handle = await dev_env.client.start_workflow(
            HealthMonitorWorkflow.run,
            MonitorInput(routes=sorted(policy.endpoints), interval_s=2),
            id=monitor_workflow_id(h.task_queue),
            task_queue=h.task_queue,
        )
        yield Deployment(h, address_of(dev_env))
        desc = await handle.describe()
        if desc.status and desc.status.name == "RUNNING":
            await handle.terminate()


@pytest.fixture
def no_worker_queue() -> str:
    return f"nobody-{uuid.uuid4().hex[:8]}"


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a ``failover`` subprocess: quiet, isolated state directory; the
    demo policy named (a worker has no default policy)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "FAILOVER_"))}
    env["FAILOVER_POLICY"] = str(DEFAULT_POLICY_PATH)
    env.update(extra)
    return env


async def run_cli(
    args: list[str], env: dict[str, str], limit_s: float = 60, exe: str = FAILOVER
) -> subprocess.CompletedProcess[str]:
    """``failover ARGS`` as a real process (its own signal handling, exit codes, stderr),
    without blocking the event loop that in-process workers run on."""
    return await asyncio.to_thread(
        subprocess.run,
        [exe, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=limit_s,
    )
