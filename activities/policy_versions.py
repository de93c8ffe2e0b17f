"""Publishing and loading policy versions (the IO side of ``RoleContext.policy_ref``).

A role context names its policy subset by ref only (:class:`activities.models.RoleContext`);
the workflow decodes it from this process's registry (:data:`POLICY_REGISTRY`). This module
fills that registry from a :class:`~stores.policies.PolicyVersionStore` and writes the
subsets a worker builds to it:

* at worker start, :func:`load_versions` reads every stored version (a run replayed here
  may name a version an earlier worker, or this one before a policy change, wrote), and
  :class:`PolicyPublisher` writes the subsets of every role this worker serves;
* a subset first built later (a per-call roster) is written before its role context is
  returned, so no history names a version the store has not seen;
* :func:`fetch_missing` reads the versions a decode looked for and did not find (restored
  since, or written by a newer worker), so the retried workflow task finds them.
"""

from __future__ import annotations

import asyncio
import json
import logging

from agent_failover.activities.policy_registry import POLICY_REGISTRY, policy_body
from agent_failover.resilience.config import PolicyConfig
from agent_failover.stores.policies import PolicyVersionStore, check_version
from agent_failover.stores.redis_link import REDIS_DOWN

log = logging.getLogger(__name__)

#: Errors of an unreachable store: logged, never fatal (this process still holds its own
#: versions; the next start or first use writes them again).
STORE_DOWN: tuple[type[BaseException], ...] = (OSError, *REDIS_DOWN)
#: How often a running worker looks for versions a decode missed.
MISSING_POLL_S = 2.0


def _decode(ref: str, body: str) -> PolicyConfig:
    check_version(ref, body)
    # Parsed, then validated in Python mode, as a policy file is (config.parse).
    return PolicyConfig.model_validate(json.loads(body))


async def load_versions(store: PolicyVersionStore) -> int:
    """Register every version in ``store`` in this process; how many were read.

    A version whose body does not match its ref, or no longer validates, is skipped with
    a warning (a run naming it then fails its workflow task with the missing-version error).
    """
    POLICY_REGISTRY.add_store(store.where)
    try:
        versions = await store.all()
    except STORE_DOWN as exc:
        log.warning("policy store %s unreadable at start: %s", store.where, exc)
        return 0
    for ref, body in versions.items():
        try:
            POLICY_REGISTRY.register(ref, _decode(ref, body))
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            log.warning("policy version %s in %s skipped: %s", ref, store.where, exc)
    return len(versions)


async def fetch_missing(store: PolicyVersionStore) -> list[str]:
    """Register the versions a decode missed that ``store`` now holds; their refs."""
    found = []
    for ref in sorted(POLICY_REGISTRY.missing):
        try:
            body = await store.get(ref)
        except STORE_DOWN:
            return found
        if body is None:
            continue
        try:
            POLICY_REGISTRY.register(ref, _decode(ref, body))
        except ValueError as exc:
            log.warning("policy version %s in %s skipped: %s", ref, store.where, exc)
            continue
        log.info("policy version %s found in %s", ref, store.where)
        found.append(ref)
    return found


async def keep_fetching_missing(store: PolicyVersionStore, stop: asyncio.Event) -> None:
    """:func:`fetch_missing` every :data:`MISSING_POLL_S` until ``stop`` is set."""
    while not stop.is_set():
        if POLICY_REGISTRY.missing:
            await fetch_missing(store)
        try:
            await asyncio.wait_for(stop.wait(), MISSING_POLL_S)
        except TimeoutError:
            pass


class PolicyPublisher:
    """Writes the policy subsets a worker builds to its store, once each per process."""

    def __init__(self) -> None:
        self.store: PolicyVersionStore | None = None
        self._published: set[str] = set()

    def bind(self, store: PolicyVersionStore) -> None:
        """Write to ``store`` from now on (everything is written again on the next use)."""
        if store is not self.store:
            self.store = store
            self._published.clear()

    async def publish(self, ref: str, policy: PolicyConfig) -> None:
        """Write ``policy`` under ``ref`` unless done already; a store outage is logged."""
        POLICY_REGISTRY.register(ref, policy)
        if self.store is None or ref in self._published:
            return
        try:
            await self.store.put(ref, policy_body(policy))
        except STORE_DOWN as exc:
            log.warning(
                "policy version %s not written to %s (%s): a worker without it cannot "
                "replay runs that name it until it is written",
                ref,
                self.store.where,
                exc,
            )
            return
        self._published.add(ref)
