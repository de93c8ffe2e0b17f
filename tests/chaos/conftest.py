"""Fixtures for chaos tests: the workflow tier's session simulator and dev server, and a
worker builder that can reuse a task queue and stores (to stand in a new worker after
the old one was killed) or put the stores on a Redis that the test kills and restarts.
"""

from __future__ import annotations

import uuid

from temporalio.client import Client
from temporalio.worker import Worker

from activities.llm import LLMActivities
from providers.client import build_http_client
from resilience.config import PolicyConfig
from stores.cache import MemoryResponseCache, RedisResponseCache
from stores.health import MemoryHealthStore, RedisHealthStore
from stores.redis_link import fail_fast_client
from tests.workflows.conftest import (  # noqa: F401  (fixtures re-exported for this tier)
    Harness,
    _workers,
    dev_env,
    policy,
    sim_admin,
    simulator,
)
from worker import llm_task_queue

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
    tq = task_queue or f"chaos-{uuid.uuid4().hex[:10]}"
    if health is None or cache is None:
        if redis_url:
            ns = f"chaos-{uuid.uuid4().hex[:10]}"
            health = RedisHealthStore(
                fail_fast_client(redis_url), namespace=ns, reconnect_interval_s=CHAOS_RECONNECT_S
            )
            cache = RedisResponseCache(
                fail_fast_client(redis_url), namespace=ns, reconnect_interval_s=CHAOS_RECONNECT_S
            )
        else:
            health, cache = MemoryHealthStore(), MemoryResponseCache()
    acts = LLMActivities(
        policy_,
        build_http_client(policy_.endpoints.values()),
        health,
        cache,
        task_queue_for=lambda role: llm_task_queue(tq, policy_.role(role).bulkhead),
    )
    return Harness(client, tq, acts, health, cache, policy_), _workers(client, acts, policy_, tq)
