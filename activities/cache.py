"""The response cache as an activity: the degraded tier's lookup.

``cache_lookup`` serves a cached answer younger than the staleness budget, saying whether
it is still fresh (or says why it missed); the verdict is
:func:`resilience.degrade.cache_age_verdict`. Writes happen in the model call that
produced the answer (:mod:`activities.model_call`), so no workflow schedules a write of
its own.
"""

from __future__ import annotations

from temporalio import activity

from agent_failover.activities.deps import ActivityDeps
from agent_failover.activities.models import (
    CachedAnswer,
    CacheLookupInput,
    CacheLookupResult,
)
from agent_failover.resilience.config import CacheTier
from agent_failover.resilience.degrade import CacheAge, cache_age_verdict
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
        age_s = entry.age(inp.now)
        tier = CacheTier(ttl_s=inp.ttl_s, max_staleness_s=inp.max_staleness_s)
        verdict = cache_age_verdict(age_s, tier)
        hit = verdict is not CacheAge.TOO_OLD
        record.cache_lookup(hit)
        if not hit:
            return CacheLookupResult(
                hit=False,
                miss_reason=f"too old: {age_s:.0f}s old >= {inp.max_staleness_s:.0f}s allowed",
            )
        return CacheLookupResult(
            hit=True,
            answer=CachedAnswer(
                content=entry.content,
                data=entry.data,
                model=entry.model,
                route=entry.route,
                age_s=age_s,
                fresh=verdict is CacheAge.FRESH,
            ),
        )
