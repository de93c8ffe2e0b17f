"""The failover's LLM activities of one worker: each concern its own class, one set of deps.

:class:`LLMActivitySet` builds the shared :class:`~activities.deps.ActivityDeps` (policy,
HTTP client, stores, task queues, bulkhead slots) once and the per-concern classes over it:

* :class:`~activities.role_context.RoleContextActivities`: ``role_context``, ``pipeline_roles``
* :class:`~activities.model_call.ModelCallActivities`: ``call_model``
* :class:`~activities.first_call.FirstCallActivities`: ``first_call`` (a call's context and
  plain first attempt in one activity)
* :class:`~activities.probes.ProbeActivities`: ``probe_endpoint``
* :class:`~activities.health.HealthActivities`: ``force_route``, ``health_table``
* :class:`~activities.cache.CacheActivities`: ``cache_lookup``

Workflows call them by reference (``RoleContextActivities.role_context``); a worker
registers :meth:`LLMActivitySet.all`, a bulkhead's worker :meth:`LLMActivitySet.bulkhead`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from agent_failover.activities.cache import CacheActivities
from agent_failover.activities.deps import ActivityDeps
from agent_failover.activities.first_call import FirstCallActivities
from agent_failover.activities.health import HealthActivities
from agent_failover.activities.model_call import ModelCallActivities
from agent_failover.activities.policy_versions import PolicyPublisher
from agent_failover.activities.probes import ProbeActivities
from agent_failover.activities.role_context import RoleContextActivities
from agent_failover.resilience.config import PolicyConfig
from agent_failover.stores.cache import ResponseCache
from agent_failover.stores.health import HealthStore


class LLMActivitySet:
    """One worker's LLM activities over its policy, HTTP client and stores."""

    def __init__(
        self,
        policy: PolicyConfig,
        http: httpx.AsyncClient,
        health: HealthStore | None,
        cache: ResponseCache | None,
        *,
        task_queue_for: Callable[[str], str],
        connect_timeout_s: float = 5.0,
        overflow_queue_for: Callable[[str], str | None] | None = None,
        bulkhead_slots: Mapping[str, int] | None = None,
    ) -> None:
        self.deps = ActivityDeps(
            policy,
            http,
            health,
            cache,
            task_queue_for=task_queue_for,
            connect_timeout_s=connect_timeout_s,
            overflow_queue_for=overflow_queue_for,
            bulkhead_slots=bulkhead_slots,
        )
        self.context = RoleContextActivities(self.deps)
        self.calls = ModelCallActivities(self.deps)
        self.first = FirstCallActivities(self.context, self.calls)
        self.probes = ProbeActivities(self.deps)
        self.health = HealthActivities(self.deps)
        self.cache = CacheActivities(self.deps)

    @property
    def policy_versions(self) -> PolicyPublisher:
        """Where the role contexts' policy subsets are published (bind it to a store)."""
        return self.deps.policy_versions

    def bind_stores(self, health: HealthStore, cache: ResponseCache) -> None:
        """Attach the stores when they are connected after construction (the plugin's case:
        workers are configured synchronously, Redis is connected when the worker starts)."""
        self.deps.bind_stores(health, cache)

    async def publish_policies(self) -> list[str]:
        """Write the subset of every role this worker serves to the policy store; their
        refs. Idempotent: the worker calls it at start."""
        return await self.deps.publish_policies()

    def all(self) -> list[Callable[..., Any]]:
        """Every activity of the set, for worker registration."""
        return [
            self.context.role_context,
            self.context.pipeline_roles,
            self.calls.call_model,
            self.first.first_call,
            self.probes.probe_endpoint,
            self.health.force_route,
            self.health.health_table,
            self.cache.cache_lookup,
        ]

    def bulkhead(self) -> list[Callable[..., Any]]:
        """What a bulkhead queue serves: the model calls and the cache around them."""
        return [self.calls.call_model, self.cache.cache_lookup]
