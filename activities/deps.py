"""What the failover activities of one worker share: policy, HTTP client, stores, queues.

:class:`ActivityDeps` is built once per worker task queue (by :class:`activities.llm.
LLMActivitySet`) and handed to every per-concern activity class, so nothing is global to
patch: tests build one over memory stores and a mock transport. It also holds what more
than one concern needs: the checked policy subsets and their refs, breaker recording, the
bulkhead semaphores. Every health observation is timestamped on the workflow's clock
(``input.now`` plus the real time the activity took, :func:`workflow_now`), so the same
code is exact in production and under the time-skipping test server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent_failover.activities.policy_registry import policy_ref
from agent_failover.resilience.breaker import Transition
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.telemetry import record

if TYPE_CHECKING:
    import httpx

    from agent_failover.stores.after_call import AfterCallWrites, CachePut
    from agent_failover.stores.cache import ResponseCache
    from agent_failover.stores.health import HealthStore
    from agent_failover.stores.in_flight import LeaseEnd

log = logging.getLogger(__name__)


def workflow_now(base: float, started_monotonic: float) -> float:
    """Workflow time now: ``base`` (workflow time at ``started_monotonic``) plus the real
    time elapsed since."""
    return base + (time.monotonic() - started_monotonic)


class ActivityDeps:
    """One worker's policy, HTTP client, stores, task queues and bulkhead slots."""

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
        self.policy = policy
        self.http = http
        # Typed as present: every activity runs after bind_stores (or got them here).
        self.health: HealthStore = health  # type: ignore[assignment]
        self.cache: ResponseCache = cache  # type: ignore[assignment]
        self.task_queue_for = task_queue_for
        self.connect_s = connect_timeout_s
        # Eager dispatch: attempts run on the workflow's own queue (``task_queue_for``) and
        # the bulkhead is a semaphore per bulkhead here; a full one overflows to the
        # bulkhead's queue (``overflow_queue_for``), whose worker shares these semaphores.
        self.overflow_queue_for = overflow_queue_for
        self.gates = {b: asyncio.Semaphore(n) for b, n in (bulkhead_slots or {}).items()}
        self._subsets: dict[tuple[str, tuple[str, ...] | None], tuple[PolicyConfig, str]] = {}
        from agent_failover.activities.policy_versions import PolicyPublisher  # worker side

        self.policy_versions = PolicyPublisher()
        self._after_call: AfterCallWrites | None = None

    def bind_stores(self, health: HealthStore, cache: ResponseCache) -> None:
        """Attach the stores when they are connected after construction (the plugin's case:
        workers are configured synchronously, Redis is connected when the worker starts)."""
        self.health = health
        self.cache = cache

    def _writes(self) -> AfterCallWrites:
        """The after-call writes over the stores bound now (rebuilt if they were rebound)."""
        from agent_failover.stores.after_call import AfterCallWrites  # worker side

        w = self._after_call
        if w is None or w.health is not self.health or w.cache is not self.cache:
            w = self._after_call = AfterCallWrites(self.health, self.cache)
        return w

    async def publish_policies(self) -> list[str]:
        """Write the subset of every role this worker serves to the policy store (bound on
        ``policy_versions``); their refs. Idempotent: the worker calls it at start."""
        refs = []
        for role in self.policy.roles:
            subset, ref = self.subset(role, None)
            await self.policy_versions.publish(ref, subset)
            refs.append(ref)
        return refs

    def subset(self, role: str, routes: list[str] | None) -> tuple[PolicyConfig, str]:
        """The role's checked policy subset and its ref (the same for every call: cached)."""
        key = (role, tuple(routes) if routes else None)
        if key not in self._subsets:
            subset = self.policy.checked_subset_for(role, routes)
            self._subsets[key] = (subset, policy_ref(subset))
        return self._subsets[key]

    async def record(
        self,
        outcome: CallOutcome,
        settings: Any,
        put: CachePut | None = None,
        ends: Sequence[LeaseEnd] = (),
    ) -> Transition | None:
        """Record ``outcome`` in the health store (with the cache write ``put`` and the
        in-flight leases' ``ends``: one round trip when they share a Redis); log and count
        a breaker transition."""
        transition = await self._writes().write(outcome, settings, put, ends)
        if transition is not None:
            log.warning(
                "breaker %s: %s -> %s (%s)",
                transition.route,
                transition.from_state.value,
                transition.to_state.value,
                transition.reason.value,
            )
            record.breaker_transition(transition)
        return transition
