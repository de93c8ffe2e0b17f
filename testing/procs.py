"""Child processes that never outlive the process that started them.

The embedded Temporal dev server and ``redis-server`` are separate binaries. If the
Python process that started them dies without running its cleanup (SIGKILL, a crash, an
unhandled signal), they would keep their ports, re-parented to PID 1. On Linux,
:func:`spawn_tied` starts them through a tiny launcher that asks the kernel to send the
child SIGTERM when its parent exits (``prctl(PR_SET_PDEATHSIG)``), then ``exec``s the
binary, so the PID returned is the binary's own. Elsewhere it is a plain ``Popen``: the
signal handlers of ``failover dev`` / ``failover demo`` still stop everything.
:func:`stop_process` is the matching graceful stop (SIGTERM, then SIGKILL).
:func:`worker_env` is the environment of a ``python worker.py`` child in tests and
benchmarks.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import WorkflowHandle

#: Seconds a child gets to exit after SIGTERM before it is killed.
DEFAULT_STOP_TIMEOUT_S = 10.0

# Runs in a fresh interpreter (-I: no site, no user env), so nothing of the parent's state
# (threads, locks) is involved, unlike a preexec_fn. PDEATHSIG survives execv. If the
# parent is already gone by the time prctl runs, the launcher's parent id changed: exit.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.prctl(1, signal.SIGTERM, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def worker_env(
    *,
    address: str,
    sim_url: str | None = None,
    task_queue: str | None = None,
    policy: str | Path | None = None,
    log_level: str = "WARNING",
    **extra: str,
) -> dict[str, str]:
    """This process's environment for a ``python worker.py`` child: the Temporal
    ``address``, the simulator (``SIM_URL``), the policy (default the demo's: never a
    worker's own default, so it is named), the task queue and, named after it, the Redis
    namespace (so workers of different tests share no keys), the log level, then ``extra``
    variables over all of it."""
    from agent_failover.config import DEFAULT_POLICY_PATH

    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "FAILOVER_POLICY": str(policy or DEFAULT_POLICY_PATH),
        "LOG_LEVEL": log_level,
    }
    if sim_url is not None:
        env["SIM_URL"] = sim_url
    if task_queue is not None:
        env["FAILOVER_TASK_QUEUE"] = env["FAILOVER_REDIS_NAMESPACE"] = task_queue
    return env | extra


def tied_command(args: Sequence[str], parent_pid: int) -> list[str]:
    """``args`` wrapped in the launcher (Linux), or unchanged elsewhere."""
    if not sys.platform.startswith("linux"):
        return list(args)
    return [sys.executable, "-I", "-c", _LAUNCHER, str(parent_pid), *args]


def spawn_tied(args: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """Start ``args`` as a child that receives SIGTERM when this process exits.

    The tie is to the calling *thread* (a kernel rule), so call it from the main thread
    or from a thread that lives as long as the child should.
    """
    import os

    return subprocess.Popen(tied_command(args, os.getpid()), **popen_kwargs)


def stop_process(
    proc: subprocess.Popen[bytes], timeout_s: float = DEFAULT_STOP_TIMEOUT_S
) -> int | None:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL; return the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)
    return proc.returncode


async def pipeline_step_worker_pid(handle: WorkflowHandle, phase: str) -> int | None:
    """The pid of the worker process running a pipeline's model call (``call_model``, or
    ``first_call`` for a call's first attempt) while the run is
    in ``phase`` (read from the SDK's default worker identity, ``pid@host``), else None:
    not in that phase, not picked up yet, or between tasks."""
    from temporalio.api.enums.v1 import PendingActivityState

    from agent_failover.workflows.models import PipelineStatus
    from agent_failover.workflows.pipeline import AgentPipelineWorkflow

    with contextlib.suppress(Exception):
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.phase != phase:
            return None
        desc = await handle.describe()
        for a in desc.raw_description.pending_activities:
            started = a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            model_call = a.activity_type.name in ("call_model", "first_call")
            if model_call and started and a.last_worker_identity:
                return int(a.last_worker_identity.split("@", 1)[0])
    return None
