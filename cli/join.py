"""How to join a running local stack from another terminal (``failover dev``, ``demo``).

A worker started by hand must use the same Temporal address and task queue, the same
simulator (its port is random) and the same Redis key namespace, or it splits the
health state. :class:`JoinInfo` holds those values; :meth:`JoinInfo.lines` renders the
exact commands with the environment they need, runnable as printed from the current
directory (the venv's ``failover`` / ``python`` are spelled with their path when they
are not on ``PATH``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from pydantic import BaseModel

EXAMPLE_TASK = "Compare two queue designs for order events"


class JoinInfo(BaseModel):
    """Everything a command or a worker in another terminal needs to use this stack."""

    temporal_address: str
    temporal_namespace: str = "default"
    task_queue: str
    ui: str | None = None
    sim_url: str
    redis_url: str
    redis_namespace: str
    policy: Path | None = None

    def env(self) -> dict[str, str]:
        """The environment variables of a worker or command joining this stack."""
        env = {
            "TEMPORAL_ADDRESS": self.temporal_address,
            "FAILOVER_TASK_QUEUE": self.task_queue,
            "SIM_URL": self.sim_url,
            "REDIS_URL": self.redis_url,
            "FAILOVER_REDIS_NAMESPACE": self.redis_namespace,
        }
        if self.temporal_namespace != "default":
            env["TEMPORAL_NAMESPACE"] = self.temporal_namespace
        if self.policy is not None:
            env["FAILOVER_POLICY"] = str(self.policy)
        return env

    def export_line(self) -> str:
        return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env().items())

    def commands(self) -> dict[str, str]:
        """The exact ``run`` / ``status`` / worker command lines (after the export)."""
        failover = executable("failover")
        worker = (
            f"{executable('python')} worker.py"
            if Path("worker.py").is_file()
            else f"{failover} worker"
        )
        return {
            "run": f"{failover} run {shlex.quote(EXAMPLE_TASK)}",
            "status": f"{failover} status",
            "worker": worker,
        }

    def lines(self) -> list[str]:
        """The join block, one item per line (no markup; safe to copy)."""
        ui = f"{self.ui}/namespaces/{self.temporal_namespace}/workflows" if self.ui else "-"
        cmd = self.commands()
        return [
            f"  Web UI     {ui}",
            f"  Temporal   {self.temporal_address}  namespace {self.temporal_namespace}  "
            f"task queue {self.task_queue}",
            f"  Simulator  {self.sim_url}  (admin: {self.sim_url}/_admin/endpoints)",
            f"  Redis      {self.redis_url}  key namespace {self.redis_namespace}",
            "  In another terminal:",
            f"    {self.export_line()}",
            f"    {cmd['run']}",
            f"    {cmd['status']}",
            f"    {cmd['worker']}   # one more worker: same queue, simulator, health state",
        ]


def executable(name: str) -> str:
    """``name`` if the shell finds this environment's one on PATH, else its path."""
    mine = Path(sys.executable).parent / name
    if not mine.exists():
        return name
    found = shutil.which(name)
    # Compare without resolving symlinks: a venv's python links to the system one.
    if found and os.path.abspath(found) == os.path.abspath(mine):
        return name
    try:
        rel = os.path.relpath(mine, Path.cwd())
    except ValueError:  # another drive (Windows)
        return str(mine)
    return rel if not rel.startswith("..") else str(mine)
