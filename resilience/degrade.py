"""Graceful-degradation helpers: reason codes, confidence and the static answer.

Pure functions the workflows use to stamp every :class:`AgentOutput` with its
degradation contract. Confidence follows one documented table so downstream agents and
dashboards can compare outputs:

============================  ==========================================================
output                        confidence
============================  ==========================================================
FULL, tier 0 (primary)        1.00
FULL, tier 1 (hot standby)    0.95
tier 2 (warm fallback)        0.80
cached response (tier 3)      0.60 at age 0, decaying linearly to 0.30 at max staleness
static fallback               0.20
============================  ==========================================================

A cached answer younger than the role's ``ttl_s`` is *fresh*; an older one is *stale* and
still served up to ``max_staleness_s`` (:func:`cache_age_verdict`). Both are served only
after every live route failed, which is the only time the workflow reads the cache; the
store keeps each entry for ``max_staleness_s`` so every age in that range is reachable.

Live answers are then multiplied by a penalty per quality-reducing reason code
(``CONTEXT_TRUNCATED`` x0.85, ``CONTEXT_SUMMARIZED`` x0.92, ``UPSTREAM_DEGRADED`` x0.90,
``PREFILL_CONTINUATION`` x0.95). Codes that only describe the failover path
(``BREAKER_OPEN``, ``RATE_LIMITED``, …) do not lower confidence: the answer came from a
route that worked, and the tier already says how good that route is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

from agent_failover.resilience.config import DEFAULT_CACHE_MAX_STALENESS_S, CacheTier, RolePolicy
from agent_failover.resilience.contracts import (
    NON_FAILURE_OUTCOMES,
    AgentOutput,
    AttemptRecord,
    Capability,
    ReasonCode,
)
from agent_failover.resilience.errors import CLASSIFICATION, ErrorClass

TIER_CONFIDENCE = {0: 1.0, 1: 0.95, 2: 0.8}
CACHE_CONFIDENCE = 0.6
CACHE_CONFIDENCE_FLOOR = 0.3
STATIC_CONFIDENCE = 0.2
REASON_PENALTY = {
    ReasonCode.CONTEXT_TRUNCATED: 0.85,
    ReasonCode.CONTEXT_SUMMARIZED: 0.92,
    ReasonCode.UPSTREAM_DEGRADED: 0.90,
    ReasonCode.PREFILL_CONTINUATION: 0.95,
}
#: Attempt outcomes that are not failures and add no reason code.
NEUTRAL_OUTCOMES = NON_FAILURE_OUTCOMES

_BY_CLASS: dict[ErrorClass, list[ReasonCode]] = {
    ErrorClass.CONNECT_ERROR: [ReasonCode.MODEL_UNAVAILABLE],
    ErrorClass.SERVER_ERROR: [ReasonCode.MODEL_UNAVAILABLE],
    ErrorClass.OVERLOADED: [ReasonCode.MODEL_UNAVAILABLE],
    ErrorClass.AUTH: [ReasonCode.MODEL_UNAVAILABLE],
    ErrorClass.MODEL_NOT_FOUND: [ReasonCode.MODEL_UNAVAILABLE],
    ErrorClass.RATE_LIMITED: [ReasonCode.RATE_LIMITED],
    ErrorClass.QUOTA_EXHAUSTED: [ReasonCode.RATE_LIMITED],
    ErrorClass.NO_RESPONSE: [ReasonCode.LATENCY_BUDGET_EXCEEDED],
    ErrorClass.SLOW_FIRST_TOKEN: [ReasonCode.LATENCY_BUDGET_EXCEEDED],
    ErrorClass.STREAM_STALLED: [ReasonCode.STREAM_INTERRUPTED],
    ErrorClass.STREAM_CUT: [ReasonCode.STREAM_INTERRUPTED],
    ErrorClass.MALFORMED_STREAM: [ReasonCode.STREAM_INTERRUPTED],
    ErrorClass.STREAM_ERROR_EVENT: [ReasonCode.STREAM_INTERRUPTED],
    ErrorClass.CONTEXT_LENGTH: [ReasonCode.CONTEXT_TOO_LONG],
    ErrorClass.CONTENT_FILTER: [ReasonCode.CONTENT_FILTERED],
    ErrorClass.INVALID_REQUEST: [ReasonCode.INVALID_REQUEST],
}
# Failures that are not provider errors: the workflow's own names for them.
_BY_NAME: dict[str, list[ReasonCode]] = {
    "breaker_rejected": [ReasonCode.BREAKER_OPEN, ReasonCode.MODEL_UNAVAILABLE],
    "attempt_timeout": [ReasonCode.LATENCY_BUDGET_EXCEEDED],
    "rate_budget": [ReasonCode.RATE_BUDGET],
}


class CacheAge(StrEnum):
    """How old a cached answer is, against its role's cache tier."""

    #: Younger than ``ttl_s``.
    FRESH = "fresh"
    #: At least ``ttl_s`` old, younger than ``max_staleness_s``: served, with low confidence.
    STALE = "stale"
    #: ``max_staleness_s`` old or older: never served.
    TOO_OLD = "too_old"


def cache_age_verdict(age_s: float, tier: CacheTier) -> CacheAge:
    """Whether a cached answer of this age may be served (fresh or stale) or not."""
    if age_s < tier.ttl_s:
        return CacheAge.FRESH
    if age_s < tier.max_staleness_s:
        return CacheAge.STALE
    return CacheAge.TOO_OLD


def reason_codes_for(error_class: ErrorClass | str | None) -> list[ReasonCode]:
    """The reason codes a failed attempt of this class puts on the final output.

    Accepts an :class:`ErrorClass`, its string value, or an attempt outcome string;
    ``None`` and non-failures (``ok``, ``skipped``, ``cancelled``, ``miss``) give ``[]``;
    an unknown failure name gives ``[MODEL_UNAVAILABLE]``.
    """
    if error_class is None:
        return []
    key = error_class.value if isinstance(error_class, ErrorClass) else str(error_class)
    if key in NEUTRAL_OUTCOMES:
        return []
    if key in _BY_NAME:
        return list(_BY_NAME[key])
    try:
        ec = ErrorClass(key)
    except ValueError:
        return [ReasonCode.MODEL_UNAVAILABLE]
    if ec in _BY_CLASS:
        return list(_BY_CLASS[ec])
    if CLASSIFICATION[ec].semantic:
        return [ReasonCode.SEMANTIC_FAILURE]
    return [ReasonCode.MODEL_UNAVAILABLE]


def confidence_for(
    capability: Capability,
    tier: int,
    reason_codes: Iterable[ReasonCode],
    *,
    cache_age_s: float | None = None,
    max_staleness_s: float | None = None,
) -> float:
    """Confidence in ``[0, 1]`` from the module's table (cache decays over ``max_staleness_s``)."""
    codes = set(reason_codes)
    if capability is Capability.STATIC or ReasonCode.STATIC_FALLBACK in codes:
        return STATIC_CONFIDENCE
    if tier >= 3 or ReasonCode.CACHED_RESPONSE in codes:
        horizon = max_staleness_s or DEFAULT_CACHE_MAX_STALENESS_S
        age = max(cache_age_s or 0.0, 0.0)
        decay = min(age / horizon, 1.0)
        value = CACHE_CONFIDENCE - (CACHE_CONFIDENCE - CACHE_CONFIDENCE_FLOOR) * decay
        return round(value, 4)
    value = TIER_CONFIDENCE.get(max(tier, 0), TIER_CONFIDENCE[2])
    for code in codes:
        value *= REASON_PENALTY.get(code, 1.0)
    return round(min(max(value, 0.0), 1.0), 4)


def failure_reason_codes(attempts: Sequence[AttemptRecord]) -> list[ReasonCode]:
    """Reason codes of every failed attempt, deduplicated in first-seen order."""
    codes: dict[ReasonCode, None] = {}
    for a in attempts:
        for code in reason_codes_for(a.outcome):
            codes.setdefault(code, None)
    return list(codes)


def cached_output(
    role: RolePolicy,
    *,
    content: str,
    data: Any,
    route: str | None,
    model: str | None,
    age_s: float,
    reasons: Sequence[ReasonCode],
    attempts: Sequence[AttemptRecord],
    latency_ms: float,
) -> AgentOutput:
    """A cached answer as a DEGRADED tier-3 output; confidence decays over the role's
    staleness budget."""
    codes = list(dict.fromkeys([*reasons, ReasonCode.CACHED_RESPONSE]))
    return AgentOutput(
        role=role.name,
        content=content,
        data=data,
        capability=Capability.DEGRADED,
        tier=3,
        route=route,
        model=model,
        reason_codes=codes,
        confidence=confidence_for(
            Capability.DEGRADED,
            3,
            codes,
            cache_age_s=age_s,
            max_staleness_s=role.roster.cache.max_staleness_s,
        ),
        attempts=list(attempts),
        cache_age_s=age_s,
        latency_ms=latency_ms,
    )


def static_output(role: RolePolicy, attempts: Sequence[AttemptRecord]) -> AgentOutput:
    """The role's static, schema-valid fallback as an output carrying the failover history."""
    static = role.roster.static
    codes = [ReasonCode.MODEL_UNAVAILABLE, *failure_reason_codes(attempts)]
    codes.append(ReasonCode.STATIC_FALLBACK)
    codes = list(dict.fromkeys(codes))
    return AgentOutput(
        role=role.name,
        content=static.content,
        data=static.data,
        capability=Capability.STATIC,
        tier=3,
        route=None,
        model=None,
        reason_codes=codes,
        confidence=confidence_for(Capability.STATIC, 3, codes),
        attempts=list(attempts),
        latency_ms=sum(a.latency_ms or 0.0 for a in attempts),
    )
