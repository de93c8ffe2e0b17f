"""The sticky queue timeout of the workers the plugin configures (issue 22 §2.2).

A run's next workflow task first goes to the sticky queue of the worker that ran it; if
that worker was SIGKILLed the task waits there for the timeout, 10 s by the SDK's default,
before any worker may take it. The plugin bounds it (2 s by default), keeps a value the
worker set itself, and the worker process reads ``FAILOVER_STICKY_QUEUE_TIMEOUT_S``.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.plugin import FailoverPlugin
from agent_failover.service import WorkerDeps, build_workers, sticky_queue_timeout_s
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.factory import Stores
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.supervisor import DEFAULT_STICKY_QUEUE_TIMEOUT, SDK_STICKY_QUEUE_TIMEOUT

STICKY = "sticky_queue_schedule_to_start_timeout"
POLICY = load_policy(DEFAULT_POLICY_PATH, env={})


def test_the_default_is_shorter_than_the_sdks() -> None:
    assert DEFAULT_STICKY_QUEUE_TIMEOUT < SDK_STICKY_QUEUE_TIMEOUT == timedelta(seconds=10)


@pytest.mark.devserver
async def test_plugin_bounds_the_sticky_timeout_unless_the_worker_set_one(
    dev_env: WorkflowEnvironment,
) -> None:
    async with httpx.AsyncClient() as http:

        def sticky(plugin: FailoverPlugin, **kw: object) -> timedelta:
            tq = f"sticky-{uuid.uuid4().hex[:8]}"
            w = Worker(dev_env.client, task_queue=tq, plugins=[plugin], **kw)  # type: ignore[arg-type]
            return w.config(active_config=True)[STICKY]

        plugin = FailoverPlugin(POLICY, stores="memory", http=http)
        assert sticky(plugin) == DEFAULT_STICKY_QUEUE_TIMEOUT
        assert sticky(plugin, **{STICKY: timedelta(seconds=5)}) == timedelta(seconds=5)
        off = FailoverPlugin(POLICY, stores="memory", http=http, sticky_queue_timeout=None)
        assert sticky(off) == SDK_STICKY_QUEUE_TIMEOUT
        own = timedelta(seconds=3)
        assert sticky(FailoverPlugin(POLICY, stores="memory", http=http,
                                     sticky_queue_timeout=own)) == own  # fmt: skip
        with pytest.raises(ValueError, match="sticky_queue_timeout must be a positive"):
            FailoverPlugin(POLICY, stores="memory", http=http, sticky_queue_timeout=timedelta())


@pytest.mark.devserver
async def test_worker_process_reads_the_sticky_timeout_from_the_environment(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAILOVER_STICKY_QUEUE_TIMEOUT_S", "3.5")
    async with httpx.AsyncClient() as http:
        deps = WorkerDeps(
            POLICY, http, Stores(MemoryHealthStore(), MemoryResponseCache(), "memory")
        )
        (main,) = build_workers(dev_env.client, deps, task_queue=f"sticky-{uuid.uuid4().hex[:8]}")
        assert main.config(active_config=True)[STICKY] == timedelta(seconds=3.5)


def test_the_environment_variable_is_checked() -> None:
    assert sticky_queue_timeout_s({}) == DEFAULT_STICKY_QUEUE_TIMEOUT.total_seconds()
    for bad in ("0", "-1", "61", "soon"):
        with pytest.raises(ValueError, match="FAILOVER_STICKY_QUEUE_TIMEOUT_S"):
            sticky_queue_timeout_s({"FAILOVER_STICKY_QUEUE_TIMEOUT_S": bad})
