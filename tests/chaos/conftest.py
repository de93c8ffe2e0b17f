"""Fixtures for chaos tests: the workflow tier's session simulator and dev server, and a
worker builder that can reuse a task queue and stores (to stand in a new worker after
the old one was killed) or put the stores on a Redis that the test kills and restarts.
"""

from __future__ import annotations

import uuid

from temporalio.client import Client
from temporalio.worker import Worker

from agent_failover.resilience.config import PolicyConfig
from agent_failover.stores.cache import MemoryResponseCache, RedisResponseCache
from agent_failover.stores.health import MemoryHealthStore, RedisHealthStore
from tests.workflows.conftest import Harness, build_harness

#: Reconnect pacing of the Redis-backed stores in chaos tests: short, so "Redis is back"
#: is noticed within a second instead of the production 5 s.
CHAOS_RECONNECT_S = 0.3


def build_worker(
    client: Client,
    policy_: PolicyConfig,
    *,
    task_queue: str | None = None,
    health: MemoryHealthStore | RedisHealthStore | None = None,
    cache: MemoryResponseCache | RedisResponseCache | None = None,
    redis_url: str | None = None,
) -> tuple[Harness, list[Worker]]:
    """A harness and its workers; pass ``task_queue``/stores to replace a dead worker."""
    return build_harness(
        client,
        policy_,
        task_queue=task_queue or f"chaos-{uuid.uuid4().hex[:10]}",
        health=health,
        cache=cache,
        redis_url=redis_url,
        reconnect_interval_s=CHAOS_RECONNECT_S if redis_url else None,
    )
