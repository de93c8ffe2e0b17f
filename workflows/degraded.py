"""The degraded tiers of a resilient call, after every live route failed.

First the response cache (tier 3: a previous full answer to the same request, fresh or
stale up to the role's ``max_staleness_s``, when the role enables it), then the role's
static fallback. Both answers say so in their capability and reason codes
(``MODEL_UNAVAILABLE`` at least).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.cache import CacheActivities
    from agent_failover.activities.models import (
        CachedAnswer,
        CacheLookupInput,
        CacheLookupResult,
    )
    from agent_failover.resilience.config import RolePolicy
    from agent_failover.resilience.contracts import AgentOutput, AttemptRecord, ReasonCode
    from agent_failover.resilience.degrade import cached_output, static_output
    from agent_failover.resilience.planner import FailoverPlan
    from agent_failover.workflows import observe
    from agent_failover.workflows.call import Call


async def degraded(
    call: Call, p: FailoverPlan, key: str, role: RolePolicy, started: Any
) -> AgentOutput:
    """The cached answer when there is one young enough, else the static fallback."""
    reasons = list(call.state.reasons)
    if ReasonCode.MODEL_UNAVAILABLE not in reasons:
        reasons.append(ReasonCode.MODEL_UNAVAILABLE)
    if p.cache is not None and p.cache.enabled:
        out = await _from_cache(call, p, key, role, started, reasons)
        if out is not None:
            return out
    out = static_output(role, call.attempts)
    return out.model_copy(
        update={
            "reason_codes": list(dict.fromkeys([*reasons, *out.reason_codes])),
            "latency_ms": (workflow.now() - started).total_seconds() * 1000,
        }
    )


async def _from_cache(
    call: Call,
    p: FailoverPlan,
    key: str,
    role: RolePolicy,
    started: Any,
    reasons: list[ReasonCode],
) -> AgentOutput | None:
    """Look the request up in the response cache (recorded as a tier-3 attempt)."""
    assert p.cache is not None
    now = workflow.now().timestamp()
    lookup: CacheLookupResult = await workflow.execute_activity_method(
        CacheActivities.cache_lookup,
        CacheLookupInput(
            key=key, now=now, ttl_s=p.cache.ttl_s, max_staleness_s=p.cache.max_staleness_s
        ),
        task_queue=call.ctx.task_queue,
        start_to_close_timeout=timedelta(seconds=10),
        summary=f"{call.role_name}: cached answer after every live route failed",
    )
    cached = lookup.answer
    call.attempts.append(
        AttemptRecord(
            route="cache",
            tier=3,
            started_at=now,
            finished_at=workflow.now().timestamp(),
            outcome="ok" if cached else "miss",
            note=_note(cached, p.cache.ttl_s) if cached else lookup.miss_reason or "no entry",
        )
    )
    if cached is None:
        return None
    observe.cache_served(call, cached.age_s)
    return cached_output(
        role,
        content=cached.content,
        data=cached.data,
        route=cached.route,
        model=cached.model,
        age_s=cached.age_s,
        reasons=reasons,
        attempts=call.attempts,
        latency_ms=(workflow.now() - started).total_seconds() * 1000,
    )


def _note(cached: CachedAnswer, ttl_s: float) -> str:
    """The cache attempt's note: the answer's age, and whether it was still fresh."""
    freshness = "fresh" if cached.fresh else f"stale, fresh for {ttl_s:.0f}s"
    return f"age {cached.age_s:.0f}s ({freshness})"
