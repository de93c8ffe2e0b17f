"""A namespace without the failover search attributes, on the dev server: the plugin's worker
registers them (local server), refuses to start with the command to create them, or
starts and lets runs skip their upserts; a skipping run completes and replays.

Before these changes, a worker started anyway and every run that upserted the attributes
failed its workflow task at each retry (``BadSearchAttributes``), forever.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import pytest_asyncio
from google.protobuf.duration_pb2 import Duration
from temporalio import workflow
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from agent_failover.activities.search_attributes import (
    forget_missing,
    known_missing,
    missing_search_attributes,
)
from agent_failover.plugin import FailoverPlugin
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.setup_errors import SearchAttributesMissing, SetupError
from agent_failover.startup import policy_version
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.factory import Stores
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.testing.harness import running

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.contracts import AgentOutput, Capability
    from agent_failover.visibility import upsert_failover_search_attributes

pytestmark = pytest.mark.devserver

ALL = ["Degraded", "EscalationState", "FailoverCount", "RevisionState", "WorstTier"]
#: A run of two upserts and a timer ends in well under this; a failing task never ends.
RUN_BUDGET_S = 20.0


@workflow.defn(sandboxed=True)
class UpsertingWorkflow:
    """A user's workflow: upserts the attributes, waits, upserts again, returns."""

    @workflow.run
    async def run(self) -> int:
        out = AgentOutput(role="analyst", content="x", capability=Capability.DEGRADED, tier=2,
                          confidence=0.5)  # fmt: skip
        summary = upsert_failover_search_attributes([out])
        await workflow.sleep(timedelta(milliseconds=10))
        upsert_failover_search_attributes([out, out])
        return summary.worst_tier


async def _fresh_namespace(env: WorkflowEnvironment) -> Client:
    """A client of a new namespace on the dev server: no custom search attributes."""
    name = f"bare-{uuid.uuid4().hex[:8]}"
    await env.client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86_400)
        )
    )
    client = await Client.connect(
        env.client.service_client.config.target_host,
        namespace=name,
        data_converter=env.client.data_converter,
    )
    for _ in range(100):  # the server's namespace cache learns the new one within seconds
        try:
            await missing_search_attributes(client)
            return client
        except RPCError:
            await asyncio.sleep(0.2)
    raise AssertionError(f"namespace {name} never became usable")


@pytest_asyncio.fixture
async def bare(dev_env: WorkflowEnvironment) -> AsyncIterator[Client]:
    forget_missing()
    yield await _fresh_namespace(dev_env)
    forget_missing()


def _worker(client: Client, policy: PolicyConfig, mode: str | None) -> Worker:
    stores = Stores(MemoryHealthStore(), MemoryResponseCache(), "test")
    plugin = FailoverPlugin(
        policy,
        stores=stores,
        start_monitor=False,
        include_pipeline=False,
        search_attributes=mode,  # type: ignore[arg-type]
    )
    return Worker(
        client,
        task_queue=f"sa-{uuid.uuid4().hex[:8]}",
        workflows=[UpsertingWorkflow],
        plugins=[plugin],
    )


async def test_worker_refuses_to_start_with_the_command_to_run(
    bare: Client, policy: PolicyConfig
) -> None:
    """``require``: the worker does not start; one line names the namespace, the missing
    attributes and the exact ``temporal operator search-attribute create`` command."""
    worker = _worker(bare, policy, "require")
    with pytest.raises(SearchAttributesMissing) as caught:
        await asyncio.wait_for(worker.run(), 30)
    msg = str(caught.value)
    assert isinstance(caught.value, SetupError)
    assert "\n" not in msg
    assert caught.value.missing == ALL
    assert f"namespace {bare.namespace!r}" in msg
    address = bare.service_client.config.target_host
    assert (
        f"temporal operator search-attribute create --address {address} "
        f"--namespace {bare.namespace} --name FailoverCount --name WorstTier --type Int"
    ) in msg
    assert "--name Degraded --type Bool" in msg
    assert "--name EscalationState --name RevisionState --type Keyword" in msg
    assert await missing_search_attributes(bare) == ALL  # nothing was added


async def test_local_server_gets_the_attributes_registered(
    bare: Client, policy: PolicyConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """Default on a loopback (dev) server: the worker registers the attributes and runs;
    its start-up line names the policy and its version, the store, queue and bulkheads."""
    assert await missing_search_attributes(bare) == ALL
    worker = _worker(bare, policy, None)
    caplog.set_level(logging.INFO, logger="agent_failover")
    async with running([worker]):
        handle = await bare.start_workflow(
            UpsertingWorkflow.run, id=f"sa-{uuid.uuid4()}", task_queue=worker.task_queue
        )
        assert await asyncio.wait_for(handle.result(), RUN_BUDGET_S) == 2
    assert await missing_search_attributes(bare) == []
    started = [
        r.getMessage() for r in caplog.records if "agent-failover worker on" in r.getMessage()
    ]
    assert len(started) == 1
    assert f"task queue {worker.task_queue}: policy a PolicyConfig object (version " in started[0]
    assert f"version {policy_version(policy)}), store test, bulkheads core (" in started[0]
    desc = await handle.describe()
    assert desc.typed_search_attributes is not None
    names = {p.key.name for p in desc.typed_search_attributes}
    assert {"FailoverCount", "WorstTier", "Degraded"} <= names


async def test_run_goes_on_without_the_attributes_and_replays(
    bare: Client, policy: PolicyConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """``warn``: the worker starts; a run that upserts completes (its upserts skipped, one
    warning), and its history replays, also once the namespace has the attributes."""
    worker = _worker(bare, policy, "warn")
    # Whatever level an earlier test in this process left on the workflow logger.
    caplog.set_level(logging.WARNING, logger="temporalio.workflow")
    with caplog.at_level(logging.WARNING):
        async with running([worker]):
            results = []
            for _ in range(2):
                handle = await bare.start_workflow(
                    UpsertingWorkflow.run, id=f"sa-{uuid.uuid4()}", task_queue=worker.task_queue
                )
                results.append(await asyncio.wait_for(handle.result(), RUN_BUDGET_S))
    assert results == [2, 2]
    assert known_missing(bare.namespace)
    skipped = [r for r in caplog.records if "upserts skipped" in r.getMessage()]
    assert len(skipped) == 1  # one warning for the namespace, not one per run or upsert
    history = await handle.fetch_history()
    replayer = Replayer(
        workflows=[UpsertingWorkflow],
        plugins=[FailoverPlugin(policy, stores="memory", include_pipeline=False)],
    )
    await replayer.replay_workflow(history)
    forget_missing()  # a worker that believes the attributes exist replays it the same
    await replayer.replay_workflow(history)
