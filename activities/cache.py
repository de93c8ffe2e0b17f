"""The response cache as an activity: the degraded tier's lookup.

``cache_lookup`` serves a cached answer younger than the staleness budget (or says why it
missed). Writes happen in the model call that produced the answer
(:mod:`activities.model_call`), so no workflow schedules a write of its own.
"""

from __future__ import annotations

from temporalio import activity

from agent_failover.activities.deps import ActivityDeps
from agent_failover.activities.models import (
    CachedAnswer,
    CacheLookupInput,
    CacheLookupResult,
)
from agent_failover.telemetry import record


class CacheActivities:
    """``cache_lookup`` over one worker's :class:`ActivityDeps`."""

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
