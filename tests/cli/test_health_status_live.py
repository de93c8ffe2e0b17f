"""``failover status`` for any deployment: the task queue it looked for in its errors, the
only running monitor when none is named, breakers live from the shared store (or their
age said), ``--from-store`` on the user's policy only."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import BreakerState
from agent_failover.testing.harness import Harness, make_harness, running
from agent_failover.testing.servers import free_port
from agent_failover.workflows.models import MonitorInput, MonitorTable
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id
from tests.cli.conftest import address_of, cli_env, invoke, run_cli

REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest_asyncio.fixture
async def on_redis(dev_env: WorkflowEnvironment, policy: PolicyConfig) -> AsyncIterator[Harness]:
    """A worker on Redis (its own key namespace) whose monitor probes once, then rests."""
    h, workers = await make_harness(dev_env.client, policy, redis_url=REDIS)
    async with running(workers):
        handle = await dev_env.client.start_workflow(
            HealthMonitorWorkflow.run,
            MonitorInput(routes=sorted(policy.endpoints), interval_s=600),
            id=monitor_workflow_id(h.task_queue),
            task_queue=h.task_queue,
        )
        deadline = time.monotonic() + 20
        while (
            await handle.query(HealthMonitorWorkflow.health, result_type=MonitorTable)
        ).table is None:
            assert time.monotonic() < deadline, "the monitor never finished a round"
            await asyncio.sleep(0.2)
        yield h
        await handle.terminate()


@pytest.mark.devserver
async def test_breakers_are_read_live_from_the_store(
    dev_env: WorkflowEnvironment, on_redis: Harness
) -> None:
    """A breaker forced open after the monitor's round shows as forced open at once
    (before: the monitor's table, closed, until its next round up to 600 s later)."""
    await on_redis.health.force("openai-us", BreakerState.FORCED_OPEN, time.time())
    args = ["status", "--address", address_of(dev_env), "--task-queue", on_redis.task_queue]
    result = await invoke(args, env={"REDIS_URL": "", "FAILOVER_REDIS_NAMESPACE": ""})
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith(f"task queue {on_redis.task_queue} · breakers: live from redis")
    row = next(ln for ln in result.output.splitlines() if "│ openai-us " in ln)
    assert "forced_open" in row, result.output.splitlines()[0]


@pytest.mark.devserver
async def test_breakers_from_the_monitor_say_how_old_they_are(
    dev_env: WorkflowEnvironment, on_redis: Harness
) -> None:
    """The store is not reachable from here: the line says the breakers are the monitor's
    and how old, and how to get them live."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    args = ["status", "--address", address_of(dev_env), "--task-queue", on_redis.task_queue]
    result = await invoke([*args, "--redis-url", dead])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert "breakers and figures: the monitor's probe round of" in first and "ago" in first
    assert "--redis-url" in first


@pytest.mark.devserver
async def test_no_monitor_names_the_queue_and_the_running_ones(
    dev_env: WorkflowEnvironment, on_redis: Harness, tmp_path
) -> None:
    """A real process: exit 1, one line naming the queue looked for and the queues whose
    monitor runs, no traceback."""
    env = cli_env(TEMPORAL_ADDRESS=address_of(dev_env), FAILOVER_STATE_DIR=str(tmp_path))
    proc = await run_cli(["status", "--task-queue", "nobody-here"], env)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr + proc.stdout
    assert lines[0].startswith("error: the health monitor is not running for task queue ")
    assert "'nobody-here'" in lines[0] and on_redis.task_queue in lines[0]


async def test_from_store_needs_the_users_policy(tmp_path) -> None:
    """No --policy and no FAILOVER_POLICY: exit 2 saying how to name it (before: the demo
    policy's routes were listed as if they were the deployment's)."""
    env = cli_env(FAILOVER_STATE_DIR=str(tmp_path))
    env.pop("FAILOVER_POLICY")
    proc = await run_cli(["status", "--from-store"], env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: --from-store needs the deployment's policy")
    assert "FAILOVER_POLICY" in proc.stderr and "Traceback" not in proc.stderr
