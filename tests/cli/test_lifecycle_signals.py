"""`failover dev` and `failover demo --serve` as real processes: SIGINT and SIGTERM stop
every child they started (Temporal dev server, embedded redis-server) and free every
port; the join instructions they print work exactly as printed; output stays quiet
unless -v."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from agent_failover.testing.servers import free_port, port_is_open
from tests.cli.conftest import FAILOVER, ROOT, cli_env

pytestmark = pytest.mark.devserver
#: The last line of the join block (see cli/join.py).
JOIN_END = "one more worker"
START_LIMIT_S = 90.0


@dataclass
class Stack:
    """A `failover dev` / `demo --serve` process and what it printed so far."""

    proc: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)

    async def read_until(self, marker: str, limit_s: float = START_LIMIT_S) -> None:
        async with asyncio.timeout(limit_s):
            while not any(marker in ln for ln in self.lines):
                raw = await self.proc.stdout.readline()  # type: ignore[union-attr]
                if not raw:
                    raise AssertionError("exited early:\n" + "\n".join(self.lines))
                self.lines.append(raw.decode().rstrip("\n"))

    def line_with(self, text: str) -> str:
        return next(ln for ln in self.lines if text in ln)

    def ports(self) -> list[int]:
        """Temporal, Web UI and simulator ports, read from the join block."""
        text = "\n".join(self.lines)
        temporal = re.search(r"Temporal\s+127\.0\.0\.1:(\d+)", text)
        ui = re.search(r"Web UI\s+http://127\.0\.0\.1:(\d+)", text)
        sim = re.search(r"Simulator\s+http://127\.0\.0\.1:(\d+)", text)
        assert temporal and ui and sim, text
        return [int(m.group(1)) for m in (temporal, ui, sim)]

    def children(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children(recursive=True)

    async def stop(self, sig: int, limit_s: float = 60.0) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        try:
            out, err = await asyncio.wait_for(self.proc.communicate(), limit_s)
        except TimeoutError:
            left = [(p.pid, p.name()) for p in self.children()]
            self.proc.kill()
            out, err = await self.proc.communicate()
            raise AssertionError(
                f"still running {limit_s:g}s after the signal; children {left}\n"
                f"{out.decode()[-1500:]}\n{err.decode()[-1500:]}"
            ) from None
        self.lines += out.decode().splitlines()
        assert self.proc.returncode is not None
        return self.proc.returncode, "\n".join(self.lines), err.decode()


async def _launch(args: list[str], tmp_path: Path) -> Stack:
    env = cli_env(
        FAILOVER_STATE_DIR=str(tmp_path),
        # The stack's own redis-server child, asked for by name (an unreachable URL is
        # refused: never silently replaced by an embedded one).
        REDIS_URL="embedded",
        FAILOVER_REDIS_NAMESPACE=f"sig-{uuid.uuid4().hex[:8]}",
    )
    proc = await asyncio.create_subprocess_exec(
        FAILOVER, *args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    return Stack(proc)


def _ports_args() -> list[str]:
    return ["--port", str(free_port()), "--ui-port", str(free_port())]


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _names(children: list[psutil.Process]) -> set[str]:
    return {p.name() for p in children}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", ["dev", "demo"])
async def test_signal_stops_every_child_and_frees_the_ports(
    command: str, sig: signal.Signals, tmp_path: Path
) -> None:
    """Each signal to each command: no child survives, every port is free, no traceback."""
    args = ["dev", *_ports_args(), "--sim-port", str(free_port())]
    if command == "demo":
        args = ["demo", "--serve", *_ports_args()]
    stack = await _launch(args, tmp_path)
    try:
        await stack.read_until(JOIN_END)
        children = stack.children()
        assert {"temporal", "redis-server"} <= _names(children)
        ports = stack.ports()
        code, out, err = await stack.stop(sig)
    finally:
        if stack.proc.returncode is None:
            stack.proc.kill()
    survivors = [p for p in children if not _gone(p)]
    assert survivors == [], survivors
    assert [p for p in ports if port_is_open("127.0.0.1", p)] == []
    # dev ends on a signal by design (0); the demo was cut short mid-run (128 + n).
    assert code == (0 if command == "dev" else 128 + sig)
    assert f"on {sig.name}" in out
    assert "Traceback" not in err and "ERROR" not in err, err
    assert not (tmp_path / "stack.json").exists()


async def test_join_instructions_work_as_printed(tmp_path: Path) -> None:
    """The printed export + `failover status` / `failover run` / worker lines, run by a
    shell exactly as printed, reach this stack: same Temporal, queue, simulator, store."""
    stack = await _launch(["dev", *_ports_args(), "--sim-port", str(free_port())], tmp_path)
    try:
        await stack.read_until(JOIN_END)
        export = stack.line_with("export ").strip()
        assert "FAILOVER_REDIS_NAMESPACE=sig-" in export and "SIM_URL=" in export
        status = await _shell(export, stack.line_with(" status").strip())
        assert status.returncode == 0, status.stderr
        assert "anthropic-us-east" in status.stdout and "health monitor: running" in status.stdout
        run = await _shell(export, stack.line_with(" run ").strip())
        assert run.returncode == 0, run.stderr
        assert "substitutions 0 of" in run.stdout and "Temporal UI:" in run.stdout
        code, worker_err = await _joined_worker(export, stack.line_with(JOIN_END).strip())
        assert code == 0, worker_err
        assert "HTTP Request" not in worker_err and "Traceback" not in worker_err
        code, _, err = await stack.stop(signal.SIGINT)
        assert code == 0 and "ERROR" not in err
    finally:
        if stack.proc.returncode is None:
            stack.proc.kill()


async def _shell(export: str, command: str) -> subprocess.CompletedProcess[str]:
    env = cli_env()
    return await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", f"{export}\n{command}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def _joined_worker(export: str, command: str) -> tuple[int, str]:
    """Start the printed worker line; wait until it polls the stack's queue; SIGTERM it."""
    worker = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        f"{export}\nexec {command.split('#')[0].strip()}",
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    address = re.search(r"TEMPORAL_ADDRESS=(\S+)", export).group(1)  # type: ignore[union-attr]
    queue = re.search(r"FAILOVER_TASK_QUEUE=(\S+)", export).group(1)  # type: ignore[union-attr]
    client = await Client.connect(address)
    async with asyncio.timeout(60):
        while await _pollers(client, queue) < 2:  # noqa: ASYNC110 - another process's state
            await asyncio.sleep(0.2)
    worker.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(worker.communicate(), 60)
    assert worker.returncode is not None
    return worker.returncode, err.decode()


async def _pollers(client: Client, queue: str) -> int:
    resp = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace="default",
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return len({p.identity for p in resp.pollers})


async def test_quiet_by_default_and_detail_with_v(tmp_path: Path) -> None:
    """Without -v: no dev-server banner, no per-request HTTP lines. With -v they return."""
    sim = ["--sim-port", str(free_port())]
    quiet = await _launch(["dev", *_ports_args(), *sim], tmp_path / "quiet")
    sim_v = ["--sim-port", str(free_port())]
    loud = await _launch(["-v", "dev", *_ports_args(), *sim_v], tmp_path / "v")
    try:
        await quiet.read_until(JOIN_END)
        await loud.read_until(JOIN_END)
        err_lines: list[str] = []
        async with asyncio.timeout(60):
            while not any("HTTP Request: POST" in ln for ln in err_lines):
                err_lines.append((await loud.proc.stderr.readline()).decode())  # type: ignore[union-attr]
        _, q_out, q_err = await quiet.stop(signal.SIGINT)
        await loud.stop(signal.SIGINT)
    finally:
        for s in (quiet, loud):
            if s.proc.returncode is None:
                s.proc.kill()
    for banner in ("Temporal Server:", "Temporal CLI", "Temporal Persistence"):
        assert banner not in q_out and banner not in q_err
    assert "HTTP Request" not in q_out + q_err
    # Warnings only (e.g. "started embedded redis"): no INFO/DEBUG detail, no errors.
    assert all(ln.startswith("WARNING ") for ln in q_err.splitlines() if ln.strip()), q_err
