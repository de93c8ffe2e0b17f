"""FAILOVER_WORKER_ROLE: what one worker process serves, and the workers it builds."""

from __future__ import annotations

import uuid

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.plugin import FailoverPlugin
from agent_failover.resilience.config import PolicyConfig
from agent_failover.service import WorkerDeps, WorkerRole, build_workers, parse_worker_role
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.factory import Stores
from agent_failover.stores.health import MemoryHealthStore


@pytest.fixture(scope="module")
def demo_policy() -> PolicyConfig:
    return load_policy(DEFAULT_POLICY_PATH)


@pytest.mark.parametrize(
    ("text", "role"),
    [
        (None, WorkerRole(True, ("core", "specialists"), shadow=True)),
        ("", WorkerRole(True, ("core", "specialists"), shadow=True)),
        ("all", WorkerRole(True, ("core", "specialists"), shadow=True)),
        ("main", WorkerRole(True, ())),
        ("shadow", WorkerRole(False, (), shadow=True)),
        ("main,shadow", WorkerRole(True, (), shadow=True)),
        ("bulkhead:specialists", WorkerRole(False, ("specialists",))),
        ("main, bulkhead:core", WorkerRole(True, ("core",))),
        (
            "bulkhead:core,bulkhead:specialists,bulkhead:core",
            WorkerRole(False, ("core", "specialists")),
        ),
    ],
)
def test_roles_parse(demo_policy: PolicyConfig, text: str | None, role: WorkerRole) -> None:
    """all (default), main, bulkhead:<name> and comma-separated mixes."""
    assert parse_worker_role(text, demo_policy) == role


@pytest.mark.parametrize("text", ["bulkhead:gpu", "bulkhead:", "worker", "main,bulkhead:nope"])
def test_bad_role_names_the_entry_and_the_known_bulkheads(
    demo_policy: PolicyConfig, text: str
) -> None:
    """A typo fails at start-up naming the entry and the policy's bulkheads."""
    with pytest.raises(ValueError, match=r"FAILOVER_WORKER_ROLE: .* \(core, specialists\)"):
        parse_worker_role(text, demo_policy)


def test_describe_round_trips(demo_policy: PolicyConfig) -> None:
    role = WorkerRole(True, ("core",))
    assert role.describe() == "main,bulkhead:core"
    assert parse_worker_role(role.describe(), demo_policy) == role


@pytest.mark.devserver
async def test_plugin_bulkhead_selection(
    demo_policy: PolicyConfig, dev_env: WorkflowEnvironment
) -> None:
    """The plugin runs the chosen bulkheads beside its main worker, and builds a standalone
    bulkhead worker on that bulkhead's queue with only the model-call activities."""
    async with httpx.AsyncClient() as http:
        every = FailoverPlugin(demo_policy, stores="memory", http=http)
        assert every.bulkheads == ("core", "specialists")
        plugin = FailoverPlugin(demo_policy, stores="memory", http=http, bulkheads=())
        assert plugin.bulkheads == ()
        with pytest.raises(ValueError, match=r"'gpu' not in the policy; its roles use: core"):
            FailoverPlugin(demo_policy, stores="memory", http=http, bulkheads=["gpu"])
        dep = f"dep-{uuid.uuid4().hex[:8]}"  # the core refuses two workers on one queue
        worker = plugin.bulkhead_worker(dev_env.client, dep, "specialists")
        assert worker.task_queue == f"{dep}-llm-specialists"
        config = worker.config(active_config=True)
        names = sorted(a.__name__ for a in config["activities"])
        assert names == ["cache_lookup", "call_model"]
        assert not config.get("workflows") and config["max_concurrent_activities"] == 32


@pytest.mark.devserver
async def test_build_workers_follows_the_role(
    demo_policy: PolicyConfig, dev_env: WorkflowEnvironment
) -> None:
    """main: one worker with our workflows and no bulkheads beside it; bulkhead-only: one
    worker per chosen bulkhead queue, no workflows."""
    async with httpx.AsyncClient() as http:
        deps = WorkerDeps(
            demo_policy, http, Stores(MemoryHealthStore(), MemoryResponseCache(), "memory")
        )
        dep = f"dep-{uuid.uuid4().hex[:8]}"
        (main,) = build_workers(dev_env.client, deps, task_queue=dep, role=WorkerRole(True, ()))
        assert main.task_queue == dep and main.config(active_config=True)["workflows"]
        (plugin,) = main.config()["plugins"]
        assert plugin.bulkheads == ()
        only = build_workers(
            dev_env.client, deps, task_queue=dep, role=WorkerRole(False, ("core", "specialists"))
        )
        assert [w.task_queue for w in only] == [f"{dep}-llm-core", f"{dep}-llm-specialists"]
        assert all(not w.config(active_config=True)["workflows"] for w in only)
