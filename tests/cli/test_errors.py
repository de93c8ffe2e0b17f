"""Every command in every failure state: one ``error:`` line saying what failed and what
to do, exit 1 (2 for bad input), never a traceback, and an answer within seconds when no
worker is running."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.testing.servers import free_port
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    EscalationState,
    MonitorInput,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
    PipelineStatus,
)
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.chaos.helpers import eventually
from tests.cli.conftest import (
    FAILOVER,
    ROOT,
    Deployment,
    address_of,
    assert_one_line_error,
    cli_env,
    invoke,
    run_cli,
)

#: Every route of the demo policy (taking them all down forces the static fallback).
ALL = sorted(load_policy(DEFAULT_POLICY_PATH, env={"SIM_URL": "http://sim.invalid"}).endpoints)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


# -- Temporal unreachable -------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["run", "Compare two caches"],
        ["status"],
        ["force", "anthropic-us-east", "open"],
        ["resolve", "pipeline-x", "retry"],
    ],
    ids=["run", "status", "force", "resolve"],
)
async def test_temporal_unreachable(args: list[str]) -> None:
    """Nothing listens at the address: one line naming it and `failover dev`, exit 1."""
    address = f"127.0.0.1:{free_port()}"
    result = await invoke([*args, "--address", address])
    assert_one_line_error(result, 1, f"cannot reach Temporal at {address}", "failover dev")


# -- Temporal up, no worker ------------------------------------------------------------


@pytest.mark.devserver
async def test_run_without_a_worker_starts_nothing(
    dev_env: WorkflowEnvironment, no_worker_queue: str
) -> None:
    """`run` with nobody polling the queue says so (and starts no pipeline)."""
    args = ["run", "Compare two caches", "--address", address_of(dev_env)]
    result = await invoke([*args, "--task-queue", no_worker_queue])
    assert_one_line_error(result, 1, "no worker is polling task queue", no_worker_queue)
    found = [w async for w in dev_env.client.list_workflows(f"TaskQueue = '{no_worker_queue}'")]
    assert found == []


@pytest.mark.devserver
@pytest.mark.parametrize("command", [["status"], ["force", "anthropic-us-east", "open"]])
async def test_monitor_never_started(
    dev_env: WorkflowEnvironment, no_worker_queue: str, command: list[str]
) -> None:
    """No monitor workflow at all: the monitor is not running, start a worker."""
    args = [*command, "--address", address_of(dev_env), "--task-queue", no_worker_queue]
    line = assert_one_line_error(await invoke(args), 1, "health monitor is not running")
    assert "failover worker" in line and "--from-store" in line


@pytest.mark.devserver
@pytest.mark.parametrize("command", [["status"], ["force", "anthropic-us-east", "open"]])
async def test_monitor_running_but_no_worker(
    dev_env: WorkflowEnvironment, no_worker_queue: str, command: list[str]
) -> None:
    """The monitor exists but its worker is gone: answered at once, not a hung query."""
    handle = await dev_env.client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(routes=["anthropic-us-east"]),
        id=monitor_workflow_id(no_worker_queue),
        task_queue=no_worker_queue,
    )
    try:
        args = [*command, "--address", address_of(dev_env), "--task-queue", no_worker_queue]
        assert_one_line_error(await invoke(args), 1, "no worker is polling task queue")
    finally:
        await handle.terminate()


@pytest.mark.devserver
async def test_resolve_on_a_queue_without_worker(
    dev_env: WorkflowEnvironment, no_worker_queue: str
) -> None:
    """A pipeline whose worker is gone: `resolve` says so instead of waiting."""
    wid = f"orphan-{uuid.uuid4().hex[:8]}"
    handle = await dev_env.client.start_workflow(
        AgentPipelineWorkflow.run, PipelineInput(task="x"), id=wid, task_queue=no_worker_queue
    )
    try:
        result = await invoke(["resolve", wid, "retry", "--address", address_of(dev_env)])
        assert_one_line_error(result, 1, "no worker is polling task queue", no_worker_queue)
    finally:
        await handle.terminate()


# -- with a worker: monitor states, refused overrides -----------------------------------


@pytest.mark.devserver
async def test_status_says_when_the_monitor_ended(deployment: Deployment) -> None:
    """A terminated monitor is reported as not running (not as "probing active")."""
    handle = deployment.harness.client.get_workflow_handle(
        monitor_workflow_id(deployment.task_queue)
    )
    await handle.terminate("test")
    line = assert_one_line_error(await invoke(["status", *deployment.args()]), 1)
    assert "health monitor is not running" in line and "terminated" in line


@pytest.mark.devserver
async def test_force_unknown_route_is_refused_with_the_known_names(
    deployment: Deployment,
) -> None:
    """The update's validator refuses it; the monitor keeps running."""
    result = await invoke(["force", "gpt-x", "open", *deployment.args()])
    line = assert_one_line_error(result, 1, "refused", "unknown route 'gpt-x'")
    assert "anthropic-us-east" in line and "gemini-flash" in line
    desc = await deployment.harness.client.get_workflow_handle(
        monitor_workflow_id(deployment.task_queue)
    ).describe()
    assert desc.status is WorkflowExecutionStatus.RUNNING


@pytest.mark.devserver
async def test_force_known_route_reports_the_transition(deployment: Deployment) -> None:
    """A valid override answers with the breaker state before and after."""
    result = await invoke(["force", "openai-us", "open", *deployment.args()])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "openai-us: closed → forced_open"
    release = await invoke(["force", "openai-us", "release", *deployment.args()])
    assert release.output.strip() == "openai-us: forced_open → closed"


async def test_force_unknown_state_is_bad_input() -> None:
    """A state that is not open/closed/release is refused locally, exit 2."""
    result = await invoke(["force", "openai-us", "sideways"])
    assert_one_line_error(result, 2, "open, closed or release")


# -- resolve: unknown, finished, not paused, paused --------------------------------------


@pytest.mark.devserver
async def test_resolve_unknown_workflow(dev_env: WorkflowEnvironment) -> None:
    """An id that does not exist: named, with where ids come from."""
    result = await invoke(["resolve", "pipeline-nope", "retry", "--address", address_of(dev_env)])
    assert_one_line_error(result, 1, "no workflow 'pipeline-nope'")


@pytest.mark.devserver
async def test_resolve_finished_pipeline(deployment: Deployment) -> None:
    """A completed run has nothing to resolve."""
    wid = f"done-{uuid.uuid4().hex[:8]}"
    await deployment.harness.client.execute_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="finish quickly", options=PipelineOptions(revision_rounds=0)),
        id=wid,
        task_queue=deployment.task_queue,
        result_type=PipelineResult,
    )
    result = await invoke(["resolve", wid, "accept_degraded", "--address", deployment.address])
    assert_one_line_error(result, 1, f"workflow '{wid}' already finished (completed")


@pytest.mark.devserver
async def test_resolve_a_monitor_that_never_escalated(deployment: Deployment) -> None:
    """A workflow without escalation handlers has nothing to resolve."""
    wid = monitor_workflow_id(deployment.task_queue)
    result = await invoke(["resolve", wid, "retry", "--address", deployment.address])
    assert_one_line_error(result, 1, "HealthMonitorWorkflow that has never escalated")


async def _any(attempts) -> bool:
    return bool(await attempts)


async def _pending(handle) -> bool:
    st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
    return st.escalation is EscalationState.PENDING


@pytest.mark.devserver
async def test_resolve_running_but_not_paused_then_paused(
    deployment: Deployment, sim_admin: SimAdmin
) -> None:
    """While the planner's routes hang the run is not paused: refused by the validator.
    Once it escalates, the same command is accepted; a decision that does not apply
    (provide_output without text) is refused locally."""
    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "hang"}])
    wid = f"pause-{uuid.uuid4().hex[:8]}"
    handle = await deployment.harness.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="wait for me", options=PipelineOptions(revision_rounds=0)),
        id=wid,
        task_queue=deployment.task_queue,
    )
    try:
        await eventually(lambda: _any(sim_admin.attempts()))
        early = await invoke(["resolve", wid, "retry", "--address", deployment.address])
        assert_one_line_error(early, 1, "refused", "not waiting for a decision", "escalation none")
        for ep in ALL:
            await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
        await eventually(lambda: _pending(handle), timeout_s=30)
        empty = await invoke(["resolve", wid, "provide_output", "--address", deployment.address])
        assert_one_line_error(empty, 2, "provide_output needs --output")
        ok = await invoke(["resolve", wid, "accept_degraded", "--address", deployment.address])
        assert ok.exit_code == 0, ok.output
        assert (
            ok.output.strip() == f"{wid}: accept_degraded accepted for step planner (role planner)"
        )
    finally:
        await handle.terminate()


async def test_in_process_command_stderr_has_only_its_own_lines() -> None:
    """A worker of the test's own process that logs warnings while an in-process command
    runs (a breaker opening, say) does not add lines to the command's stderr: in
    production the worker is another process."""
    worker_log = logging.getLogger("agent_failover.worker")
    done = asyncio.Event()

    async def worker_warns() -> None:
        while not done.is_set():
            worker_log.warning("breaker for route r opened (test worker)")
            await asyncio.sleep(0.001)

    chatter = asyncio.create_task(worker_warns())
    try:
        result = await invoke(["resolve", "x", "shrug"])
    finally:
        done.set()
        await chatter
    assert_one_line_error(result, 2, "action:")


async def test_resolve_unknown_action_is_bad_input() -> None:
    """The action is validated locally; pydantic's message without its URL."""
    result = await invoke(["resolve", "x", "shrug"])
    line = assert_one_line_error(result, 2, "action:")
    assert "http" not in line


# -- run: bad input, failed pipeline --------------------------------------------------------


@pytest.mark.parametrize("task", ["", "   "])
async def test_run_bad_input_is_field_message(task: str) -> None:
    """`failover run ""`: one `field: message` line, no pydantic URL, exit 2."""
    result = await invoke(["run", task, "--address", "127.0.0.1:1"])
    line = assert_one_line_error(result, 2, "task:")
    assert "http" not in line and "pydantic" not in line


# -- status --from-store, config check, sim, dev, demo, worker ------------------------------


async def test_status_from_store_without_redis() -> None:
    """The store is unreachable: named, with the way out."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = await invoke(
        ["status", "--from-store", "--redis-url", url, "--policy", str(DEFAULT_POLICY_PATH)]
    )
    assert_one_line_error(result, 1, f"cannot reach the health store at {url}")


async def test_config_check_missing_file(tmp_path: Path) -> None:
    """A file that is not there: exit 2, the path and the reason."""
    result = await invoke(["config", "check", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "cannot read policy file" in result.output


async def test_config_check_nul_byte(tmp_path: Path) -> None:
    """A NUL byte in the policy: exit 2 naming it and where, no traceback (before: exit 1
    with "unexpected error: ReaderError")."""
    bad = tmp_path / "nul.yaml"
    bad.write_bytes(b"breaker:\n  min_calls: 10\x00\n")
    result = await invoke(["config", "check", str(bad)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{bad}:2:16: a NUL byte" in result.output


async def test_worker_with_a_nul_byte_in_its_policy(tmp_path: Path) -> None:
    """`python worker.py` with that policy: exit 2, the problem on stderr, no traceback."""
    bad = tmp_path / "nul.yaml"
    bad.write_bytes(b"breaker:\n  min_calls: 10\x00\n")
    proc = await run_cli(["worker.py"], cli_env(FAILOVER_POLICY=str(bad)), exe=sys.executable)
    assert proc.returncode == 2, proc.stderr
    assert "a NUL byte" in proc.stderr and "Traceback" not in proc.stderr


async def test_worker_refuses_a_policy_without_a_planner(tmp_path: Path) -> None:
    """The worker registers the pipeline: a policy with no planner role is refused at
    start-up, exit 2 naming the role (before: it loaded, and every run failed later)."""
    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    del data["roles"]["planner"]
    bad = tmp_path / "no-planner.yaml"
    bad.write_text(yaml.safe_dump(data))
    proc = await run_cli(["worker.py"], cli_env(FAILOVER_POLICY=str(bad)), exe=sys.executable)
    assert proc.returncode == 2, proc.stderr
    assert "roles.planner: missing" in proc.stderr and "Traceback" not in proc.stderr


async def test_sim_on_a_busy_port(busy_port: int) -> None:
    """The simulator cannot bind: one line naming the port."""
    result = await invoke(["sim", "--port", str(busy_port)])
    assert_one_line_error(result, 1, f"port {busy_port} is already in use")


@pytest.mark.parametrize("command", ["dev", "demo"])
async def test_stack_on_a_busy_port(
    command: str, busy_port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporal's port is taken: one line, nothing started, no state touched."""
    monkeypatch.setenv("FAILOVER_STATE_DIR", str(tmp_path))
    (tmp_path / "temporal.db").write_text("earlier runs")
    result = await invoke([command, "--port", str(busy_port), "--ui-port", str(free_port())])
    assert_one_line_error(result, 1, f"port {busy_port} is already in use", "--port")
    assert (tmp_path / "temporal.db").read_text() == "earlier runs"


async def test_dev_with_an_invalid_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad policy: exit 2 with the field, and the simulator it had started is stopped."""
    monkeypatch.setenv("FAILOVER_STATE_DIR", str(tmp_path))
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFAULT_POLICY_PATH.read_text().replace("interval_s: 3", "interval_s: yes"))
    sim_port = free_port()
    ports = ["--port", str(free_port()), "--ui-port", str(free_port())]
    result = await invoke(["dev", "--policy", str(bad), *ports, "--sim-port", str(sim_port)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("error: invalid policy")
    assert "probes.interval_s: expected a number, got a boolean (true)" in result.output
    with socket.socket() as s:
        s.bind(("127.0.0.1", sim_port))  # free again


@pytest.mark.parametrize(
    ("extra", "code", "fragment"),
    [
        ({"TEMPORAL_ADDRESS": "127.0.0.1:1"}, 1, "cannot reach Temporal at 127.0.0.1:1"),
        ({"FAILOVER_SHUTDOWN_GRACE_S": "soon"}, 2, "FAILOVER_SHUTDOWN_GRACE_S"),
        ({"LOG_LEVEL": "LOUD"}, 2, "unknown log level"),
    ],
    ids=["temporal-unreachable", "bad-grace", "bad-log-level"],
)
async def test_worker_startup_failures(extra: dict[str, str], code: int, fragment: str) -> None:
    """`python worker.py` that cannot start: one line on stderr, nothing on stdout."""
    proc = await run_cli(["worker.py"], cli_env(**extra), exe=sys.executable)
    assert proc.returncode == code, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and fragment in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.devserver
async def test_run_when_the_worker_just_died(
    dev_env: WorkflowEnvironment, simulator, no_worker_queue: str
) -> None:
    """A worker killed a moment ago is still listed as a poller, but nobody answers:
    `run` says so within seconds and terminates the run it started."""
    from agent_failover.cli.ops import live_pollers

    env = cli_env(
        TEMPORAL_ADDRESS=address_of(dev_env),
        SIM_URL=simulator.url,
        FAILOVER_TASK_QUEUE=no_worker_queue,
        FAILOVER_REDIS_NAMESPACE=no_worker_queue,
    )
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "worker.py", cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await eventually(lambda: _polled(dev_env, no_worker_queue), timeout_s=60)
    finally:
        worker.kill()  # SIGKILL: no graceful goodbye to the server
        await worker.wait()
    assert await live_pollers(dev_env.client, no_worker_queue) >= 1
    args = ["run", "orphan", "--address", address_of(dev_env), "--task-queue", no_worker_queue]
    line = assert_one_line_error(await invoke(args), 1, "no worker answered the new pipeline")
    assert no_worker_queue in line
    query = f"TaskQueue = '{no_worker_queue}' AND WorkflowType = 'AgentPipelineWorkflow'"
    runs = [w async for w in dev_env.client.list_workflows(query)]
    # The listing (visibility) may still show a run as it was a moment before the
    # terminate; each run's own description is read from its history.
    statuses = [
        (await dev_env.client.get_workflow_handle(w.id, run_id=w.run_id).describe()).status
        for w in runs
    ]
    assert runs and all(s is WorkflowExecutionStatus.TERMINATED for s in statuses)
    await dev_env.client.get_workflow_handle(monitor_workflow_id(no_worker_queue)).terminate()


async def _polled(env: WorkflowEnvironment, queue: str) -> bool:
    from agent_failover.cli.ops import live_pollers

    return await live_pollers(env.client, queue) > 0


@pytest.mark.devserver
async def test_run_interrupted_leaves_the_pipeline_running(
    deployment: Deployment, sim_admin: SimAdmin
) -> None:
    """Ctrl-C on `failover run`: exit 130, one line saying the pipeline goes on and where."""
    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "hang"}])
    proc = await asyncio.create_subprocess_exec(
        FAILOVER, "run", "keep going", *deployment.args(),
        cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    query = f"TaskQueue = '{deployment.task_queue}' AND WorkflowType = 'AgentPipelineWorkflow'"

    async def started() -> bool:
        return bool(await sim_admin.attempts()) and bool(
            [w async for w in deployment.harness.client.list_workflows(query)]
        )

    await eventually(started, timeout_s=30)
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 130
    assert out.decode().startswith("started pipeline-") and "Traceback" not in out.decode()
    lines = [ln for ln in err.decode().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: interrupted: pipeline "), lines
    wid = lines[0].split("pipeline ")[1].split()[0]
    assert "keeps running" in lines[0] and f"/workflows/{wid}" in lines[0]
    handle = deployment.harness.client.get_workflow_handle(wid)
    assert (await handle.describe()).status is WorkflowExecutionStatus.RUNNING
    await handle.terminate()
