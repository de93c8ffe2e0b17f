"""A test worker in one call: the failover activities over fresh stores, on a uuid queue.

``build_harness(client, policy)`` returns the activities (memory stores, or Redis under a
unique namespace) and a worker carrying :class:`FailoverPlugin` (our workflows and
activities, plus :class:`ResilientCallWorkflow`, its text-only twin and
:class:`RepeatedCallWorkflow`; the plugin runs one worker per bulkhead beside it);
``async with running(workers):`` runs them for the body of a test.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import httpx
from temporalio.client import Client
from temporalio.converter import PayloadCodec
from temporalio.worker import Plugin as WorkerPlugin
from temporalio.worker import Worker

from agent_failover.activities.llm import LLMActivitySet
from agent_failover.plugin import FailoverPlugin
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.pipeline import pipeline_policy_errors
from agent_failover.stores.cache import MemoryResponseCache, RedisResponseCache
from agent_failover.stores.factory import Stores
from agent_failover.stores.health import MemoryHealthStore, RedisHealthStore
from agent_failover.stores.policies import MemoryPolicyStore, PolicyVersionStore
from agent_failover.stores.redis_link import fail_fast_client
from agent_failover.testing.workflows import (
    CallInput,
    RepeatedCallWorkflow,
    ResilientCallWorkflow,
    ResilientTextWorkflow,
)

if TYPE_CHECKING:
    from temporalio.testing import WorkflowEnvironment

    from agent_failover.resilience.options import CallOptions


@dataclass
class Harness:
    client: Client
    task_queue: str
    activities: LLMActivitySet
    health: MemoryHealthStore | RedisHealthStore
    cache: MemoryResponseCache | RedisResponseCache
    policy: PolicyConfig
    #: Where the workers keep policy versions (what role contexts name by ref).
    policy_store: PolicyVersionStore = field(default_factory=MemoryPolicyStore)

    async def call(
        self,
        role: str = "plain",
        request: ChatRequest | str | None = None,
        *,
        options: CallOptions | None = None,
        max_tokens: int | None = None,
        workflow_id: str | None = None,
        env: WorkflowEnvironment | None = None,
    ) -> AgentOutput:
        """One ``resilient_complete`` call of ``role`` in :class:`ResilientCallWorkflow` on
        this harness's worker, its result as the workflow returned it.

        ``request`` may be a whole :class:`ChatRequest`, a user message's text, or None (a
        unique user message, so no two calls share a cache entry); ``max_tokens`` caps a
        request built from text. ``env``: a time-skipping
        environment, whose automatic skipping is held off while the call runs (so timers
        elsewhere, such as the monitor's, do not move time under the call).
        """
        if not isinstance(request, ChatRequest):
            text = request if request is not None else f"task {uuid.uuid4().hex}"
            request = ChatRequest(messages=[Message(role="user", content=text)])
            if max_tokens is not None:
                request = request.model_copy(update={"max_tokens": max_tokens})
        run = self.client.execute_workflow(
            ResilientCallWorkflow.run,
            CallInput(role=role, request=request, options=options),
            id=workflow_id or f"call-{uuid.uuid4().hex[:10]}",
            task_queue=self.task_queue,
            result_type=AgentOutput,
        )
        if env is None:
            return await run
        with env.auto_time_skipping_disabled():
            return await run


def _workers(
    client: Client,
    plugin: FailoverPlugin,
    tq: str,
    workflows: Sequence[type] = (),
    plugins: Sequence[WorkerPlugin] = (),
) -> list[Worker]:
    return [
        Worker(
            client,
            task_queue=tq,
            workflows=[
                ResilientCallWorkflow,
                ResilientTextWorkflow,
                RepeatedCallWorkflow,
                *workflows,
            ],
            plugins=[*plugins, plugin],
            # A bug in workflow code fails the test at once instead of retrying the task.
            workflow_failure_exception_types=[Exception],
        )
    ]


def _pipeline(policy: PolicyConfig, include: bool | None) -> bool:
    """``include``, or (None) whether the policy can serve the bundled pipeline."""
    return not pipeline_policy_errors(policy.roles) if include is None else include


def build_harness(
    client: Client,
    policy: PolicyConfig,
    *,
    redis_url: str | None = None,
    task_queue: str | None = None,
    health: MemoryHealthStore | RedisHealthStore | None = None,
    cache: MemoryResponseCache | RedisResponseCache | None = None,
    reconnect_interval_s: float | None = None,
    codec: PayloadCodec | None = None,
    http: httpx.AsyncClient | None = None,
    shadow: bool | None = None,
    dispatch: Literal["eager", "queue"] | None = None,
    bulkhead_slots: Mapping[str, int] | None = None,
    policy_store: PolicyVersionStore | None = None,
    include_pipeline: bool | None = None,
    workflows: Sequence[type] = (),
    plugins: Sequence[WorkerPlugin] = (),
) -> tuple[Harness, list[Worker]]:
    """Activities over fresh stores (memory, or Redis under a unique namespace).

    Pass ``task_queue`` and the stores of a dead worker to stand in a replacement;
    ``codec`` seals the Redis cache's entries (the client must carry the same codec);
    ``http`` is the providers' client (e.g. over a :class:`FaultTransport`); ``shadow``
    is the plugin's (False: nobody serves the shadow queue); ``dispatch`` and
    ``bulkhead_slots`` go to :class:`FailoverPlugin`; ``policy_store`` keeps the policy
    versions (default: a fresh in-memory one; pass one to a replacement worker to share);
    ``include_pipeline``: the plugin's (None: the bundled pipeline too when the policy has
    its roles, so the same harness runs it; your own policy gets your workflows only).
    ``workflows``: more workflow classes for the worker (a user's, an example's);
    ``plugins``: more worker plugins, before ours (e.g. PydanticAI's ``PydanticAIPlugin``).
    """
    tq = task_queue or f"test-{uuid.uuid4().hex[:10]}"
    if health is None or cache is None:
        if redis_url:
            ns = f"test-wf-{uuid.uuid4().hex[:10]}"
            extra = (
                {}
                if reconnect_interval_s is None
                else {"reconnect_interval_s": reconnect_interval_s}
            )
            health = RedisHealthStore(fail_fast_client(redis_url), namespace=ns, **extra)
            cache = RedisResponseCache(
                fail_fast_client(redis_url), namespace=ns, codec=codec, **extra
            )
        else:
            health, cache = MemoryHealthStore(), MemoryResponseCache()
    policies = policy_store or MemoryPolicyStore()
    stores = Stores(health, cache, "test", policies=policies)
    plugin = FailoverPlugin(
        policy,
        stores=stores,
        start_monitor=False,
        codec=codec or False,
        http=http,
        dispatch=dispatch,
        bulkhead_slots=bulkhead_slots,
        shadow=shadow,
        include_pipeline=_pipeline(policy, include_pipeline),
    )
    acts = plugin.activities_for(tq)
    harness = Harness(client, tq, acts, health, cache, policy, policies)
    return harness, _workers(client, plugin, tq, workflows, plugins)


async def make_harness(
    client: Client, policy: PolicyConfig, **kw: object
) -> tuple[Harness, list[Worker]]:
    """:func:`build_harness` for async callers (fixtures, scripts)."""
    return build_harness(client, policy, **kw)  # type: ignore[arg-type]


class _running:
    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers

    async def __aenter__(self) -> None:
        self.tasks = [asyncio.create_task(w.run()) for w in self.workers]

    async def __aexit__(self, *exc: object) -> None:
        for w in self.workers:
            await w.shutdown()
        await asyncio.gather(*self.tasks, return_exceptions=True)


running = _running
