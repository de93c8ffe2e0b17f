"""The whole local stack in one process: simulator, Temporal dev server, stores, worker.

Used by ``failover dev`` (runs until Ctrl-C or SIGTERM) and ``failover demo``. The policy
is loaded after the simulator starts, because the demo policy's base URLs read
``SIM_URL``. Everything started is owned by the returned :class:`DevStack`: ``stop()``
tears it down in reverse and never skips the Temporal server, whatever failed before it;
a failure half-way through :func:`start_stack` stops what had already started. The dev
server is a child tied to this process (it dies with it even on SIGKILL, on Linux).
``.failover/stack.json`` tells other commands (and other terminals) how to join.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agent_failover.cli.join import JoinInfo
from agent_failover.cli.policyfile import load_policy_for_cli
from agent_failover.cli.stackfile import stack_file, state_dir, temporal_db, ui_url
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.logs import redact_policy_secrets
from agent_failover.providers.extras import without_missing_extras
from agent_failover.resilience.config import PolicyConfig
from agent_failover.service import DEFAULT_TASK_QUEUE, WorkerDeps, build_deps, build_workers
from agent_failover.stores.factory import DEFAULT_REDIS_URL
from agent_failover.supervisor import keep_monitor_running
from agent_failover.testing.servers import DevServerError, port_is_open, start_dev_server
from agent_failover.testing.sim.server import RunningSimulator, start_simulator

log = logging.getLogger(__name__)


#: How long the monitor supervisor may take to notice it should stop.
SUPERVISOR_STOP_S = 10.0
#: A local stack's workers drain for a short while only: Ctrl-C should feel immediate.
DEV_SHUTDOWN_GRACE_S = 5.0
#: The longest one step of stopping a stack may take before the next starts: a step that
#: hangs (a task deaf to cancellation, a store that does not close) must not keep the
#: dev server and Redis, stopped by later steps, running with their ports.
STOP_STEP_LIMIT_S = 15.0


@dataclass
class DevStack:
    """Handles to the running pieces; ``await stop()`` tears them down in reverse."""

    sim: RunningSimulator
    env: WorkflowEnvironment
    policy: PolicyConfig
    deps: WorkerDeps
    workers: list[Worker]
    address: str
    ui: str | None
    join: JoinInfo
    task_queue: str = DEFAULT_TASK_QUEUE
    #: Routes of the policy left out, one line each (why, and what to install).
    left_out: list[str] = field(default_factory=list)
    #: The monitor supervisor: cancelled first, so it does not restart what is stopping.
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    #: The workers' run() tasks: awaited after shutdown (they drain the bulkheads).
    _runs: list[asyncio.Task[None]] = field(default_factory=list)
    #: Tells the supervisor to return (it is not cancelled mid-call: see service).
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _restore: list[Callable[[], object]] = field(default_factory=list)

    @property
    def client(self) -> Client:
        return self.env.client

    async def stop(self) -> None:
        """Stop workers, stores, Temporal and the simulator; each step runs even if an
        earlier one failed, so no process or port is left behind."""
        await stop_in_steps(
            [
                ("monitor supervisor", self._cancel_tasks),
                ("workers", self._shutdown_workers),
                ("stores", self.deps.close),
                ("Temporal dev server", self.env.shutdown),
                ("simulator", self.sim.stop),
            ]
        )
        with contextlib.suppress(FileNotFoundError):
            stack_file().unlink()
        for restore in self._restore:
            restore()

    async def _cancel_tasks(self) -> None:
        self._stop.set()
        _, late = (
            await asyncio.wait(self._tasks, timeout=SUPERVISOR_STOP_S) if self._tasks else ((), ())
        )
        for t in late:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _shutdown_workers(self) -> None:
        await asyncio.gather(*(w.shutdown() for w in self.workers), return_exceptions=True)
        await asyncio.gather(*self._runs, return_exceptions=True)


async def stop_in_steps(
    steps: list[tuple[str, Callable[[], Awaitable[object]]]],
    limit_s: float = STOP_STEP_LIMIT_S,
) -> None:
    """Run each named stop step in turn, each within ``limit_s``: a step that fails or
    overruns is logged (naming it, and for an overrun where the step and the other tasks
    were waiting) and the next one runs anyway, so what later steps stop (the dev server,
    Redis, the simulator) is stopped and its ports freed."""
    for name, step in steps:
        task = asyncio.ensure_future(step())
        done, _ = await asyncio.wait({task}, timeout=limit_s)
        if not done:
            log.warning(
                "stopping the %s took over %gs: going on to the next step; waiting in: %s",
                name,
                limit_s,
                waiting_in(task),
            )
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
            continue
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("stopping the %s failed: %s", name, exc)


def waiting_in(step: asyncio.Future[object], most: int = 8) -> str:
    """Where ``step`` and the loop's other pending tasks are waiting: each task's name and
    innermost frame (file:line function), for the log line of a stop step that hung."""
    tasks = [step, *(t for t in asyncio.all_tasks() if t is not step and not t.done())]
    where = []
    for t in tasks[:most]:
        frames = t.get_stack() if isinstance(t, asyncio.Task) else []
        f = frames[-1] if frames else None
        at = f"{Path(f.f_code.co_filename).name}:{f.f_lineno} {f.f_code.co_name}" if f else "?"
        where.append(f"{t.get_name() if isinstance(t, asyncio.Task) else 'step'} at {at}")
    return "; ".join(where)


def _set_env(name: str, value: str | None) -> str | None:
    """Set (or unset, for None) an environment variable; return its previous value."""
    previous = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    return previous


def clean_state(db: Path | None = None) -> list[Path]:
    """Delete the dev server's database (and SQLite side files); return what was removed."""
    db = db or temporal_db()
    removed = []
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal")):
        if p.exists():
            p.unlink()
            removed.append(p)
    return removed


def _check_ports(temporal_port: int | None, ui: bool, ui_port: int | None) -> None:
    """Fail before touching any state when the ports are taken."""
    if temporal_port is None:
        return
    for port in (temporal_port, (ui_port or temporal_port + 1000) if ui else None):
        if port and port_is_open("127.0.0.1", port):
            raise DevServerError(
                f"port {port} is already in use (is `failover dev` or another Temporal "
                "running?): stop it or pass other ports with --port / --ui-port"
            )


def print_left_out(console: Console, stack: DevStack) -> None:
    """One line per route of the policy this stack left out, with why and what to install."""
    for line in stack.left_out:
        console.print(f"left out route {line}", style="yellow", markup=False, highlight=False)


async def start_stack(
    *,
    policy_path: str | os.PathLike[str] | None = None,
    temporal_port: int | None = None,
    ui: bool = True,
    ui_port: int | None = None,
    sim_port: int = 0,
    persist: bool = True,
    clean: bool = False,
    monitor: bool = True,
    task_queue: str = DEFAULT_TASK_QUEUE,
    redis_url: str | None = None,
    namespace: str | None = None,
) -> DevStack:
    """Start simulator, Temporal (with UI), stores and workers; return when ready.

    ``clean`` deletes the previous run's Temporal database first (``persist`` keeps one
    in ``.failover/temporal.db``). Raises ``DevServerError`` (busy port, server exit) or
    ``OSError`` (simulator port) with a message fit for one line.
    """
    _check_ports(temporal_port, ui, ui_port)
    if clean:
        clean_state()
    async with contextlib.AsyncExitStack() as undo:
        sim, restore_sim_url = await _start_simulator(sim_port, undo)
        policy_file = policy_path or os.environ.get("FAILOVER_POLICY", DEFAULT_POLICY_PATH)
        # A route whose extra is missing could never answer (nor its breaker close).
        policy, left_out = without_missing_extras(load_policy_for_cli(policy_file))
        redact_policy_secrets(policy)  # the keys' values are masked in every log line
        env = await start_dev_server(
            port=temporal_port,
            ui=ui,
            ui_port=ui_port,
            db_file=temporal_db() if persist else None,
            log_file=state_dir() / "temporal.log",
        )
        undo.push_async_callback(env.shutdown)
        ns = namespace or os.environ.get("FAILOVER_REDIS_NAMESPACE", "failover")
        deps = await build_deps(
            policy, redis_url=redis_url or os.environ.get("REDIS_URL"), namespace=ns, embedded=True
        )
        undo.push_async_callback(deps.close)
        stack = _assemble(
            sim, env, policy, deps, task_queue, ui, ui_port, ns, redis_url, Path(policy_file)
        )
        undo.push_async_callback(stack._shutdown_workers)
        stack.left_out = left_out
        if monitor:
            await _keep_monitor(stack, undo)
        write_stack_file(stack)
        stack._restore.append(restore_sim_url)
        undo.pop_all()
    return stack


async def _start_simulator(
    port: int, undo: contextlib.AsyncExitStack
) -> tuple[RunningSimulator, Callable[[], object]]:
    """The simulator, stopped by ``undo``; SIM_URL points at it until the returned
    callable restores it (``undo`` does too, should the stack fail to start)."""
    sim = await start_simulator(port=port)
    undo.push_async_callback(sim.stop)
    # The policy's base URLs and the tool server read SIM_URL; put it back afterwards
    # so a process that runs a stack (tests, tools) is not left pointing at a dead one.
    restore_sim_url = functools.partial(_set_env, "SIM_URL", _set_env("SIM_URL", sim.url))
    undo.callback(restore_sim_url)
    return sim, restore_sim_url


async def _keep_monitor(stack: DevStack, undo: contextlib.AsyncExitStack) -> None:
    """Keep the health monitor running beside the stack (stopped by ``undo`` or
    ``stack.stop()``); returns once it has a first table to show."""
    keeper = keep_monitor_running(
        stack.client, stack.policy, task_queue=stack.task_queue, stop=stack._stop
    )
    stack._tasks.append(asyncio.create_task(keeper))
    undo.push_async_callback(stack._cancel_tasks)
    # Announce the stack once `failover status` has something to show.
    await _first_health_table(stack.client, stack.task_queue)


async def _first_health_table(client: Client, task_queue: str, limit_s: float = 15.0) -> bool:
    """Wait (bounded) until the monitor has finished its first probe round."""
    from agent_failover.workflows.models import MonitorTable
    from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id

    handle = client.get_workflow_handle(monitor_workflow_id(task_queue))
    deadline = asyncio.get_running_loop().time() + limit_s
    while asyncio.get_running_loop().time() < deadline:
        try:
            table = await handle.query(HealthMonitorWorkflow.health, result_type=MonitorTable)
            if table.table is not None:
                return True
        except (RPCError, WorkflowQueryFailedError):
            pass  # not started yet, or its first task still running
        await asyncio.sleep(0.1)  # another process's progress: nothing to await but time
    return False


def _assemble(
    sim: RunningSimulator,
    env: WorkflowEnvironment,
    policy: PolicyConfig,
    deps: WorkerDeps,
    task_queue: str,
    ui: bool,
    ui_port: int | None,
    namespace: str,
    redis_url: str | None,
    policy_path: Path,
) -> DevStack:
    address = env.client.service_client.config.target_host
    workers = build_workers(
        env.client, deps, task_queue=task_queue, shutdown_grace_s=DEV_SHUTDOWN_GRACE_S
    )
    ui_base = ui_url(address, ui_port) if ui else None
    embedded = deps.stores.embedded
    join = JoinInfo(
        temporal_address=address,
        task_queue=task_queue,
        ui=ui_base,
        sim_url=sim.url,
        redis_url=embedded.url
        if embedded
        else (redis_url or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL),
        redis_namespace=namespace,
        # Always named: a worker joining the stack has no default policy.
        policy=policy_path,
    )
    stack = DevStack(
        sim=sim,
        env=env,
        policy=policy,
        deps=deps,
        workers=workers,
        address=address,
        ui=ui_base,
        join=join,
        task_queue=task_queue,
    )
    stack._runs.extend(asyncio.create_task(w.run()) for w in workers)
    return stack


def write_stack_file(stack: DevStack) -> None:
    """What other commands (and terminals) read to find this stack."""
    path = stack_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = stack.join.model_dump(mode="json")
    data |= {"redis": stack.deps.stores.backend, "pid": os.getpid()}
    # Names kept from earlier versions of this file.
    data |= {"sim_url": stack.join.sim_url, "namespace": stack.join.redis_namespace}
    path.write_text(json.dumps(data, indent=2))
