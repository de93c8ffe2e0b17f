"""Fixtures for workflow tests: one dev server and one simulator per session, a fresh
worker (uuid task queue, uuid store namespace) per test, faults cleared between tests.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.llm import LLMActivities
from cli.stack import start_dev_server, start_time_skipping
from config import DEFAULT_POLICY_PATH
from providers.client import build_http_client
from resilience.config import PolicyConfig, load_policy
from sim.admin import SimAdmin
from sim.server import RunningSimulator, start_simulator
from stores.cache import MemoryResponseCache, RedisResponseCache
from stores.health import MemoryHealthStore, RedisHealthStore
from stores.redis_link import fail_fast_client
from tests.workflows.helpers import ResilientCallWorkflow
from worker import llm_task_queue, workflow_runner
from workflows.monitor import HealthMonitorWorkflow
from workflows.pipeline import AgentPipelineWorkflow


@pytest_asyncio.fixture(scope="session")
async def simulator() -> AsyncIterator[RunningSimulator]:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    yield sim
    await sim.stop()


@pytest_asyncio.fixture
async def sim_admin(simulator: RunningSimulator) -> AsyncIterator[SimAdmin]:
    """Admin client; the simulator is reset (faults and attempt log) before each test."""
    admin = SimAdmin(simulator.url)
    await admin.reset()
    yield admin
    await admin.reset()
    await admin.aclose()


@pytest_asyncio.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(ui=False)
    yield env
    await env.shutdown()


@pytest_asyncio.fixture(scope="session")
async def ts_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_time_skipping()
    yield env
    await env.shutdown()


@pytest.fixture
def policy(simulator: RunningSimulator) -> PolicyConfig:
    """The demo policy pointed at this session's simulator, plus two test roles.

    ``plain`` is the analyst without hedging (one route at a time, so conduct is exact);
    ``hedged`` hedges after 200 ms.
    """
    base = load_policy(DEFAULT_POLICY_PATH, env={**os.environ, "SIM_URL": simulator.url})
    analyst = base.role("analyst")
    plain = analyst.model_copy(
        update={"name": "plain", "hedging": analyst.hedging.model_copy(update={"enabled": False})}
    )
    hedged = analyst.model_copy(
        update={
            "name": "hedged",
            "hedging": analyst.hedging.model_copy(
                update={"enabled": True, "delay_ms": 200.0, "max_hedges": 1}
            ),
        }
    )
    return base.model_copy(update={"roles": {**base.roles, "plain": plain, "hedged": hedged}})


@dataclass
class Harness:
    client: Client
    task_queue: str
    activities: LLMActivities
    health: MemoryHealthStore | RedisHealthStore
    cache: MemoryResponseCache | RedisResponseCache
    policy: PolicyConfig


def _workers(client: Client, acts: LLMActivities, policy: PolicyConfig, tq: str) -> list[Worker]:
    workers = [
        Worker(
            client,
            task_queue=tq,
            workflows=[AgentPipelineWorkflow, HealthMonitorWorkflow, ResilientCallWorkflow],
            activities=acts.all(),
            workflow_runner=workflow_runner(),
            # A bug in workflow code fails the test at once instead of retrying the task.
            workflow_failure_exception_types=[Exception],
        )
    ]
    for bh in sorted({r.bulkhead for r in policy.roles.values()}):
        workers.append(
            Worker(
                client,
                task_queue=llm_task_queue(tq, bh),
                activities=[acts.call_model, acts.cache_lookup, acts.cache_store],
            )
        )
    return workers


async def make_harness(
    client: Client, policy: PolicyConfig, *, redis_url: str | None = None
) -> tuple[Harness, list[Worker]]:
    """Activities over fresh stores (memory, or Redis under a unique namespace)."""
    tq = f"test-{uuid.uuid4().hex[:10]}"
    if redis_url:
        ns = f"test-wf-{uuid.uuid4().hex[:10]}"
        health = RedisHealthStore(fail_fast_client(redis_url), namespace=ns)
        cache = RedisResponseCache(fail_fast_client(redis_url), namespace=ns)
    else:
        health, cache = MemoryHealthStore(), MemoryResponseCache()
    http = build_http_client(policy.endpoints.values())
    acts = LLMActivities(
        policy,
        http,
        health,
        cache,
        task_queue_for=lambda role: llm_task_queue(tq, policy.role(role).bulkhead),
    )
    return Harness(client, tq, acts, health, cache, policy), _workers(client, acts, policy, tq)


@pytest_asyncio.fixture
async def harness(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    """A running worker on the dev server with in-memory stores, for one test."""
    h, workers = await make_harness(dev_env.client, policy)
    async with _running(workers):
        yield h


class _running:
    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers

    async def __aenter__(self) -> None:
        import asyncio

        self.tasks = [asyncio.create_task(w.run()) for w in self.workers]

    async def __aexit__(self, *exc: object) -> None:
        import asyncio

        for w in self.workers:
            await w.shutdown()
        await asyncio.gather(*self.tasks, return_exceptions=True)


running = _running
