"""The health monitor follows the policy across a worker restart (issue 22 §1.6), on the
dev server: worker 1 starts the monitor with the shipped routes; worker 2 replaces it on
the same queue and stores with a policy that adds a route, and the new route is probed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.supervisor import keep_monitor_running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import MonitorTable
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id
from tests.chaos.helpers import eventually
from tests.workflows.conftest import Harness, make_harness, running

pytestmark = pytest.mark.devserver

#: Beyond one probe interval: worker 2's start and its replay of the monitor's history
#: (up to 1.8 s measured on 2 busy cores), then the round's probes and table refresh.
SLACK_S = 3.0
#: The route the rollout adds: a second deployment of an existing endpoint.
NEW = "openai-us-canary"


def with_new_route(policy: PolicyConfig) -> PolicyConfig:
    """``policy`` plus :data:`NEW` (the simulator's ``openai-us`` under another name)."""
    grown = policy.model_copy(deep=True)
    grown.endpoints[NEW] = grown.endpoints["openai-us"].model_copy()
    return grown


@contextlib.asynccontextmanager
async def keeper(h: Harness, policy: PolicyConfig) -> AsyncIterator[None]:
    """A worker's monitor keeper for ``policy`` (what FailoverPlugin runs beside it)."""
    stop = asyncio.Event()
    task = asyncio.create_task(
        keep_monitor_running(h.client, policy, task_queue=h.task_queue, stop=stop)
    )
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def table_of(handle: WorkflowHandle) -> MonitorTable:
    return await handle.query(
        HealthMonitorWorkflow.health, result_type=MonitorTable, rpc_timeout=timedelta(seconds=2)
    )


async def probed(handle: WorkflowHandle, route: str) -> bool:
    """Whether the monitor's last round sent ``route`` a probe."""
    try:
        result = (await table_of(handle)).results.get(route)
    except Exception:
        return False  # not started, or its first task not run yet
    return result is not None and not result.skipped


async def round_finished(handle: WorkflowHandle) -> bool:
    """Whether the monitor finished a whole round (probes, then the table refresh, whose
    workflow task also started the wait for the next round): it is idle until then."""
    try:
        table = await table_of(handle)
    except Exception:
        return False
    return table.rounds >= 1 and table.table is not None


async def test_restarted_worker_with_a_new_route_gets_it_probed(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """Within one probe interval of worker 2's start (plus slack for its start-up and the
    replay of the monitor's history) the monitor lists the new route and its round sends
    it a probe, recorded in the health store.

    Worker 1 stops while the monitor waits for its next round. Stopped right after the
    probes' results (as this test did), it often stopped just as the table refresh's
    workflow task reached it: a task a stopping worker has polled is dropped by the SDK and
    the server gives it to another worker only after the task timeout (10 s; see
    temporalio/sdk-python#783), which is a worker-shutdown race, not the follow delay."""
    grown = with_new_route(policy)
    h1, workers = await make_harness(dev_env.client, policy)
    handle = dev_env.client.get_workflow_handle(monitor_workflow_id(h1.task_queue))
    try:
        async with running(workers), keeper(h1, policy):
            await eventually(lambda: probed(handle, "openai-us"), 20)
            await eventually(lambda: round_finished(handle), 20)
            assert NEW not in (await table_of(handle)).routes
        h2, workers = await make_harness(
            dev_env.client, grown, task_queue=h1.task_queue, health=h1.health, cache=h1.cache
        )
        started = time.monotonic()
        async with running(workers), keeper(h2, grown):
            await eventually(lambda: probed(handle, NEW), grown.probes.interval_s + SLACK_S)
            took = time.monotonic() - started
            table = await table_of(handle)
            assert table.results[NEW].reason == "no_recent_traffic"
            snap = await h2.health.snapshot([NEW], now=time.time(), window_s=60, min_calls=1)
            assert snap.get(NEW).last_probe_at is not None
            print(f"new route probed {took:.2f} s after worker 2 started")
    finally:
        with contextlib.suppress(Exception):
            await handle.terminate()
