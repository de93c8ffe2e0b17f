"""The health monitor follows the policy (issue 22 §1.6), on the time-skipping server: an
older worker's policy never takes it back, and continue-as-new keeps the followed policy
(the worker restart itself: ``test_monitor_policy_devserver.py``).
"""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.supervisor import follow_policy, monitor_policy
from agent_failover.workflows.models import MonitorInput, MonitorTable
from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id
from tests.chaos.helpers import eventually
from tests.workflows.conftest import make_harness, running
from tests.workflows.test_monitor_policy_devserver import NEW, keeper, table_of, with_new_route


async def _table(handle: WorkflowHandle) -> MonitorTable:
    return await table_of(handle)


async def _follows(handle: WorkflowHandle, policy: PolicyConfig) -> bool:
    """Whether the monitor lists every route of ``policy`` (a bounded wait: False before
    the monitor follows policies at all)."""
    try:
        return set(policy.endpoints) <= set((await _table(handle)).routes)
    except Exception:
        return False


async def test_an_older_workers_policy_does_not_take_the_monitor_back(
    ts_env: WorkflowEnvironment, policy: PolicyConfig
) -> None:
    """The newer worker's policy stays: the old one's (an earlier start) is refused by the
    update's validator, and the monitor keeps probing the new route."""
    grown = with_new_route(policy)
    old = monitor_policy(policy, since=1.0)
    h, workers = await make_harness(ts_env.client, grown)
    wid = monitor_workflow_id(h.task_queue)
    handle = ts_env.client.get_workflow_handle(wid)
    async with running(workers), keeper(h, grown):
        await eventually(lambda: _follows(handle, grown), 60)
        with pytest.raises(WorkflowUpdateFailedError) as exc:
            await handle.execute_update(HealthMonitorWorkflow.follow_policy, old)
        assert "is older" in str(exc.value.cause)
        assert await follow_policy(h.client, wid, old)  # answered: nothing to do
        table = await _table(handle)
        assert table.policy_ref == monitor_policy(grown).policy_ref and NEW in table.routes
    await handle.terminate()


async def test_the_next_run_continues_with_the_followed_policy(
    ts_env: WorkflowEnvironment, policy: PolicyConfig
) -> None:
    """A monitor started by hand with one route, brought to the grown policy, continues as
    new with the grown policy's routes (not its first input's)."""
    grown = with_new_route(policy)
    h, workers = await make_harness(ts_env.client, grown)
    async with running(workers):
        handle = await h.client.start_workflow(
            HealthMonitorWorkflow.run,
            MonitorInput(routes=["openai-us"], interval_s=3, iterations_per_run=2),
            id=f"monitor-{uuid.uuid4().hex[:8]}",
            task_queue=h.task_queue,
        )
        first = (await handle.describe()).run_id
        await handle.execute_update(HealthMonitorWorkflow.follow_policy, monitor_policy(grown))
        await ts_env.sleep(3 * grown.probes.interval_s)
        latest = h.client.get_workflow_handle(handle.id)
        assert (await latest.describe()).run_id != first
        table = await _table(latest)
        assert NEW in table.routes and set(grown.endpoints) == set(table.routes)
        await latest.terminate()
