"""The response cache as activities: the degraded tier's lookup, and an explicit write.

``cache_lookup`` serves a cached answer younger than the staleness budget (or says why it
missed); ``cache_store`` writes one. A model call asked to caches its own answer
(:mod:`activities.model_call`); ``cache_store`` is the separate write of runs that
started before it did.
"""

from __future__ import annotations

from temporalio import activity

from agent_failover.activities.deps import ActivityDeps
from agent_failover.activities.models import (
    CachedAnswer,
    CacheLookupInput,
    CacheLookupResult,
    CacheStoreInput,
)
from agent_failover.stores.cache import CachedEntry
from agent_failover.telemetry import record


class CacheActivities:
    """``cache_lookup`` and ``cache_store`` over one worker's :class:`ActivityDeps`."""

    def __init__(self, deps: ActivityDeps) -> None:
        self._deps = deps

    @activity.defn(name="cache_lookup")
    async def cache_lookup(self, inp: CacheLookupInput) -> CacheLookupResult:
        """The cached answer for this key if it is younger than the staleness budget,
        else an explicit miss saying why (no entry, or too old)."""
        entry = await self._deps.cache.get(inp.key, now=inp.now)
        if entry is None:
            record.cache_lookup(False)
            return CacheLookupResult(hit=False, miss_reason="no entry")
        age_s = max(0.0, inp.now - entry.stored_at)
        hit = age_s <= inp.max_staleness_s
        record.cache_lookup(hit)
        if not hit:
            return CacheLookupResult(
                hit=False,
                miss_reason=f"stale: {age_s:.0f}s old > {inp.max_staleness_s:.0f}s allowed",
            )
        return CacheLookupResult(
            hit=True,
            answer=CachedAnswer(
                content=entry.content,
                data=entry.data,
                model=entry.model,
                route=entry.route,
                age_s=age_s,
            ),
        )

    @activity.defn(name="cache_store")
    async def cache_store(self, inp: CacheStoreInput) -> None:
        """Remember a full-capability answer for the degraded tier."""
        entry = CachedEntry(
            role=inp.role,
            content=inp.content,
            data=inp.data,
            model=inp.model,
            route=inp.route,
            stored_at=inp.now,
        )
        await self._deps.cache.put(inp.key, entry, ttl_s=inp.ttl_s)
