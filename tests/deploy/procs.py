"""Worker processes for the topology tests: ``python worker.py`` with a given environment,
its output collected to a file, stopped with SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from agent_failover.config import DEFAULT_POLICY_PATH

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class WorkerProc:
    """One running ``python worker.py``; its stdout and stderr go to ``log``."""

    name: str
    proc: asyncio.subprocess.Process
    log: Path

    @property
    def identity_prefix(self) -> str:
        """Temporal's default worker identity starts with the process id."""
        return f"{self.proc.pid}@"

    async def stop(self) -> int:
        """SIGTERM, wait for the drain, return the exit code (kill after 30 s)."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        return self.proc.returncode  # type: ignore[return-value]

    def output(self) -> str:
        return self.log.read_text(errors="replace")


async def start_worker(name: str, env: dict[str, str], log_dir: Path) -> WorkerProc:
    """Start ``python worker.py`` from the repository root with ``env`` (over os.environ)."""
    log = log_dir / f"{name}.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "worker.py",
            cwd=ROOT,
            # The demo policy is never a worker's default: name it.
            env={"FAILOVER_POLICY": str(DEFAULT_POLICY_PATH), **os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return WorkerProc(name, proc, log)


async def wait_polling(client, task_queue: str, timeout_s: float = 60.0) -> None:
    """Wait until a worker polls ``task_queue`` (`failover run` refuses a queue nobody
    polls, and a process needs a few seconds to import and connect)."""
    from agent_failover.cli.ops import live_pollers

    async with asyncio.timeout(timeout_s):
        while not await live_pollers(client, task_queue):  # noqa: ASYNC110 - another process
            await asyncio.sleep(0.2)
