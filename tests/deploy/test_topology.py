"""The docker-compose topology with pip-installed binaries: one main worker process and one
process per bulkhead task queue (FAILOVER_WORKER_ROLE), sharing one Redis and one Temporal
dev server, the payload codec on in every process and in the CLI. A pipeline completes; its
history shows each bulkhead's model calls served by that bulkhead's process, workflow tasks
by the main one; the processes share breaker state and the sealed cache through Redis."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from agent_failover.cli.main import app
from agent_failover.codec import generate_key
from agent_failover.stores.cache import SEALED_PREFIX
from agent_failover.stores.redis_link import fail_fast_client
from agent_failover.testing.sim.server import RunningSimulator
from agent_failover.workflows.monitor import monitor_workflow_id
from tests.deploy.procs import WorkerProc, start_worker, wait_polling
from tests.stores.conftest import _delete_namespace

pytestmark = [pytest.mark.devserver, pytest.mark.redis]
ROLES = {"main": "main", "core": "bulkhead:core", "specialists": "bulkhead:specialists"}


def _task_queues(history) -> dict[int, tuple[str, str]]:
    """scheduled event id -> (activity type, task queue) of every scheduled activity."""
    out = {}
    for e in history.events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            a = e.activity_task_scheduled_event_attributes
            out[e.event_id] = (a.activity_type.name, a.task_queue.name)
    return out


def _who_served(history) -> list[tuple[str, str, str]]:
    """(activity type, task queue, worker identity) of every started activity, and
    ("workflow task", queue, identity) of every workflow task."""
    scheduled = _task_queues(history)
    served = []
    for e in history.events:
        if e.HasField("activity_task_started_event_attributes"):
            a = e.activity_task_started_event_attributes
            served.append((*scheduled[a.scheduled_event_id], a.identity))
        if e.HasField("workflow_task_started_event_attributes"):
            served.append(("workflow task", "", e.workflow_task_started_event_attributes.identity))
    return served


async def test_main_and_bulkhead_processes_share_redis_and_temporal(
    dev_env: WorkflowEnvironment,
    simulator: RunningSimulator,
    sim_admin,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """Three worker processes (main, bulkhead:core, bulkhead:specialists) run one pipeline."""
    tq = f"topo-{uuid.uuid4().hex[:8]}"
    env = {
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "SIM_URL": simulator.url,
        "REDIS_URL": redis_url,
        "FAILOVER_REDIS_NAMESPACE": tq,
        "FAILOVER_TASK_QUEUE": tq,
        "FAILOVER_CODEC_KEYS": f"topo:{generate_key()}",
        "LOG_LEVEL": "INFO",
    }
    procs: dict[str, WorkerProc] = {}
    try:
        for name, role in ROLES.items():
            procs[name] = await start_worker(name, {**env, "FAILOVER_WORKER_ROLE": role}, tmp_path)
        await wait_polling(dev_env.client, tq)
        # --address: without it `run` cannot print the UI link when TEMPORAL_ADDRESS is set
        # (fixed on the CLI rework branch).
        args = ["run", "Compare two queues", "--task-queue", tq, "--no-escalate"]
        args += ["--address", env["TEMPORAL_ADDRESS"]]
        run = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
        assert run.exit_code == 0, run.output
        assert "[echo:" in run.output and "synthesis" in run.output  # decrypted by the CLI
        wid = run.output.split("/workflows/")[-1].split()[0]
        history = await dev_env.client.get_workflow_handle(wid).fetch_history()
        _assert_served_by_the_right_process(history, procs, tq)
        await _assert_shared_redis(redis_url, tq)
        codes = {name: await p.stop() for name, p in procs.items()}
        assert codes == dict.fromkeys(ROLES, 0), {n: p.output()[-2000:] for n, p in procs.items()}
        assert "serving bulkhead:core" in procs["core"].output()
        assert "payload codec on (key topo)" in procs["main"].output()
    finally:
        for p in procs.values():
            await p.stop()
        await dev_env.client.get_workflow_handle(monitor_workflow_id(tq)).terminate()
        await _delete_namespace(redis_url, tq)


def _assert_served_by_the_right_process(history, procs: dict[str, WorkerProc], tq: str) -> None:
    served = _who_served(history)
    calls = [(q, ident) for kind, q, ident in served if kind == "call_model"]
    assert {q for q, _ in calls} == {f"{tq}-llm-core", f"{tq}-llm-specialists"}
    for queue, ident in calls:
        owner = "core" if queue.endswith("-llm-core") else "specialists"
        assert ident.startswith(procs[owner].identity_prefix), (queue, ident)
    main_prefix = procs["main"].identity_prefix
    assert all(i.startswith(main_prefix) for k, _, i in served if k == "workflow task")


async def _assert_shared_redis(redis_url: str, namespace: str) -> None:
    """Health state and cache entries of all processes sit in the one namespace, sealed."""
    r = fail_fast_client(redis_url)
    try:
        keys = [k.decode() async for k in r.scan_iter(match=f"{namespace}:*")]
        cache = [k for k in keys if ":cache:" in k]
        assert cache
        for k in cache:
            assert (await r.get(k)).startswith(SEALED_PREFIX)
        assert any(k != c for k in keys for c in cache)  # health state beside the cache
    finally:
        await r.aclose()
