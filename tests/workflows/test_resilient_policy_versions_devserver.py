"""A run outlives a policy change: the version its history names comes from the policy store.

A workflow makes a call under policy A, its worker stops, and a worker restarted with
policy B (a fresh process: nothing in memory) replays the run's history, whose first role
context names A by ref only, then makes the next call under B. With the store shared, the
run completes; with a store that lacks A, the workflow task fails naming the ref (the run is
kept) and resumes once A is restored.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agent_failover.activities.policy_registry import POLICY_REGISTRY, policy_body
from agent_failover.plugin import FailoverPlugin
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.options import CallOptions
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.factory import Stores
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.stores.policies import MemoryPolicyStore, PolicyVersionStore
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.resilient import resilient_complete
from tests.workflows.record_histories import policy_refs_of

pytestmark = pytest.mark.devserver


@workflow.defn(sandboxed=False)
class TwoCallsWorkflow:
    """One call, a wait for the ``proceed`` signal, another call of the same role."""

    def __init__(self) -> None:
        self.calls = 0
        self.go = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True

    @workflow.query
    def done(self) -> int:
        return self.calls

    @workflow.run
    async def run(self, role: str) -> list[str]:
        request = ChatRequest(messages=[Message(role="user", content="policy versions")])
        first = await resilient_complete(role, request)
        self.calls = 1
        await workflow.wait_condition(lambda: self.go)
        # A fresh read (no reuse of the first call's context, which a restart shorter
        # than the reuse age would allow): the second call must see the new policy.
        second = await resilient_complete(role, request, options=CallOptions(context_reuse_s=0))
        self.calls = 2
        return [first.content, second.content]


def _policy_b(policy: PolicyConfig) -> PolicyConfig:
    """The policy with the ``plain`` role changed: another subset, another ref."""
    plain = policy.roles["plain"].model_copy(update={"ttft_budget_ms": 2500.0})
    return policy.model_copy(update={"roles": {**policy.roles, "plain": plain}})


@asynccontextmanager
async def _worker(
    client: Client, tq: str, policy: PolicyConfig, store: PolicyVersionStore
) -> AsyncIterator[None]:
    """A worker as a fresh process has it: nothing in memory but its policy store."""
    POLICY_REGISTRY.reset()
    stores = Stores(MemoryHealthStore(), MemoryResponseCache(), "test", policies=store)
    plugin = FailoverPlugin(policy, stores=stores, start_monitor=False, codec=False)
    # Default failure types: a workflow-task error retries the task (as in production).
    async with Worker(client, task_queue=tq, workflows=[TwoCallsWorkflow], plugins=[plugin]):
        yield
    await plugin.aclose()


async def _first_call_under_a(
    client: Client, tq: str, policy: PolicyConfig, store: PolicyVersionStore
) -> WorkflowHandle:
    handle = await client.start_workflow(
        TwoCallsWorkflow.run, "plain", id=f"pv-{uuid.uuid4().hex[:10]}", task_queue=tq
    )
    async with _worker(client, tq, policy, store):
        for _ in range(200):
            if await handle.query(TwoCallsWorkflow.done) == 1:
                break
            await asyncio.sleep(0.05)
    return handle


async def test_a_run_started_under_policy_a_completes_on_a_worker_restarted_with_b(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    client, tq, store = dev_env.client, f"pv-{uuid.uuid4().hex[:10]}", MemoryPolicyStore()
    handle = await _first_call_under_a(client, tq, policy, store)
    async with _worker(client, tq, _policy_b(policy), store):
        await handle.signal(TwoCallsWorkflow.proceed)
        assert len(await asyncio.wait_for(handle.result(), 30)) == 2
    history = await handle.fetch_history()
    ref_a, ref_b = policy_refs_of(history)
    assert ref_a != ref_b and set(await store.all()) >= {ref_a, ref_b}
    # Loaded at start: the replay found A at once (no failed workflow task on the way).
    failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    assert not [e for e in history.events if e.event_type == failed]


async def test_a_missing_version_fails_the_task_not_the_run_until_restored(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """The restarted worker's store lacks A: its workflow task fails naming A's ref; the
    run stays open, and finishes once A is put back in the store the worker reads."""
    client, tq, old = dev_env.client, f"pv-{uuid.uuid4().hex[:10]}", MemoryPolicyStore()
    handle = await _first_call_under_a(client, tq, policy, old)
    (ref_a,) = policy_refs_of(await handle.fetch_history())
    body_a = await old.get(ref_a)
    new = MemoryPolicyStore()
    async with _worker(client, tq, _policy_b(policy), new):
        await handle.signal(TwoCallsWorkflow.proceed)
        failure = await _task_failure(handle)
        assert ref_a in failure and "'plain'" in failure and "policy store" in failure
        assert (await handle.describe()).status.name == "RUNNING"
        assert body_a is not None
        await new.put(ref_a, body_a)  # restored: fetched in the background, task retried
        assert len(await asyncio.wait_for(handle.result(), 60)) == 2
    assert policy_body(POLICY_REGISTRY[ref_a]) == body_a


async def _task_failure(handle: WorkflowHandle) -> str:
    """The message (with causes) of the run's first failed workflow task."""
    for _ in range(200):
        async for e in handle.fetch_history_events():
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                f = e.workflow_task_failed_event_attributes.failure
                return json.dumps([f.message, f.cause.message, f.stack_trace])
        await asyncio.sleep(0.05)
    raise AssertionError("no workflow task failed")
