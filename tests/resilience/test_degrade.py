"""Degradation helpers: reason codes, the confidence table and the static output."""

from __future__ import annotations

import pytest

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AttemptRecord, Capability, ReasonCode
from agent_failover.resilience.degrade import confidence_for, reason_codes_for, static_output
from agent_failover.resilience.errors import ErrorClass


@pytest.mark.parametrize("error_class", list(ErrorClass))
def test_every_error_class_maps_to_codes(error_class: ErrorClass) -> None:
    """Every provider error class yields at least one reason code, by value or by name."""
    assert reason_codes_for(error_class)
    assert reason_codes_for(error_class.value) == reason_codes_for(error_class)


def test_specific_reason_codes() -> None:
    """Key classes map to their documented codes; non-failures map to nothing."""
    assert reason_codes_for(ErrorClass.RATE_LIMITED) == [ReasonCode.RATE_LIMITED]
    assert reason_codes_for(ErrorClass.SLOW_FIRST_TOKEN) == [ReasonCode.LATENCY_BUDGET_EXCEEDED]
    assert reason_codes_for(ErrorClass.STREAM_CUT) == [ReasonCode.STREAM_INTERRUPTED]
    assert reason_codes_for(ErrorClass.INVALID_OUTPUT) == [ReasonCode.SEMANTIC_FAILURE]
    assert reason_codes_for(ErrorClass.CONTEXT_LENGTH) == [ReasonCode.CONTEXT_TOO_LONG]
    assert reason_codes_for("breaker_rejected")[0] is ReasonCode.BREAKER_OPEN
    assert reason_codes_for(None) == reason_codes_for("ok") == reason_codes_for("cancelled") == []
    assert reason_codes_for("something-new") == [ReasonCode.MODEL_UNAVAILABLE]


def test_confidence_table() -> None:
    """FULL t0 1.0, t1 0.95, t2 0.8; cache 0.6 decaying to 0.3; static 0.2."""
    assert confidence_for(Capability.FULL, 0, []) == 1.0
    assert confidence_for(Capability.FULL, 1, [ReasonCode.BREAKER_OPEN]) == 0.95
    assert confidence_for(Capability.DEGRADED, 2, [ReasonCode.SMALLER_MODEL]) == 0.8
    cached = [ReasonCode.CACHED_RESPONSE]
    assert confidence_for(Capability.DEGRADED, 3, cached, cache_age_s=0) == 0.6
    half = confidence_for(Capability.DEGRADED, 3, cached, cache_age_s=50, max_staleness_s=100)
    assert half == pytest.approx(0.45)
    assert confidence_for(Capability.DEGRADED, 3, cached, cache_age_s=1e9) == 0.3
    assert confidence_for(Capability.STATIC, 3, [ReasonCode.STATIC_FALLBACK]) == 0.2


def test_quality_penalties_and_ordering() -> None:
    """Penalties multiply; a truncated tier-2 answer still beats cache, and cache beats static."""
    truncated = confidence_for(Capability.DEGRADED, 0, [ReasonCode.CONTEXT_TRUNCATED])
    assert truncated == pytest.approx(0.85)
    both = [ReasonCode.CONTEXT_TRUNCATED, ReasonCode.UPSTREAM_DEGRADED]
    assert confidence_for(Capability.DEGRADED, 1, both) == pytest.approx(
        0.95 * 0.85 * 0.9, abs=1e-4
    )
    cached = [ReasonCode.CACHED_RESPONSE]
    tier2_cut = confidence_for(Capability.DEGRADED, 2, [ReasonCode.CONTEXT_TRUNCATED])
    assert tier2_cut > confidence_for(Capability.DEGRADED, 3, cached)
    assert confidence_for(Capability.DEGRADED, 3, cached, cache_age_s=1e9) > 0.2


def test_static_output_is_schema_valid_and_flagged(demo_policy: PolicyConfig) -> None:
    """The static output carries the role's fallback data, STATIC capability and history."""
    role = demo_policy.role("critic")
    attempts = [
        AttemptRecord(route="anthropic-us-east", tier=0, started_at=1, outcome="server_error",
                      latency_ms=120.0),
        AttemptRecord(route="openai-us", tier=1, started_at=2, outcome="skipped"),
        AttemptRecord(route="cheap-mini", tier=2, started_at=3, outcome="slow_first_token",
                      latency_ms=2000.0),
    ]  # fmt: skip
    out = static_output(role, attempts)
    assert out.capability is Capability.STATIC and out.tier == 3 and out.degraded
    assert out.data == {"verdict": "revise", "reasons": [role.roster.static.data["reasons"][0]]}
    assert out.reason_codes == [
        ReasonCode.MODEL_UNAVAILABLE,
        ReasonCode.LATENCY_BUDGET_EXCEEDED,
        ReasonCode.STATIC_FALLBACK,
    ]
    assert out.confidence == 0.2 and out.attempts == attempts
    # two routes failed; the skipped one was never called, so it is not a substitution
    assert out.latency_ms == pytest.approx(2120.0) and out.substitutions == 2


def test_cached_output_decays_over_the_roles_staleness_budget(demo_policy: PolicyConfig) -> None:
    """A cached answer is DEGRADED tier 3; its confidence falls as it ages toward the role's
    max_staleness_s, not a global horizon."""
    from agent_failover.resilience.degrade import cached_output

    role = demo_policy.role("researcher")
    budget = role.roster.cache.max_staleness_s

    def out(age: float):
        return cached_output(
            role, content="c", data=None, route="r", model="m", age_s=age,
            reasons=[ReasonCode.MODEL_UNAVAILABLE], attempts=[], latency_ms=1.0,
        )  # fmt: skip

    fresh, half, stale = out(0.0), out(budget / 2), out(budget)
    assert fresh.capability is Capability.DEGRADED and fresh.tier == 3
    assert fresh.reason_codes == [ReasonCode.MODEL_UNAVAILABLE, ReasonCode.CACHED_RESPONSE]
    assert fresh.confidence > half.confidence > stale.confidence
    assert half.cache_age_s == budget / 2


def test_cache_age_verdict_fresh_then_stale_then_too_old() -> None:
    """Fresh below ttl_s, stale from ttl_s to max_staleness_s, never served after."""
    from agent_failover.resilience.config import CacheTier
    from agent_failover.resilience.degrade import CacheAge, cache_age_verdict

    tier = CacheTier(ttl_s=600, max_staleness_s=3600)
    assert cache_age_verdict(0, tier) is CacheAge.FRESH
    assert cache_age_verdict(599.9, tier) is CacheAge.FRESH
    assert cache_age_verdict(601, tier) is CacheAge.STALE
    assert cache_age_verdict(3599.9, tier) is CacheAge.STALE
    assert cache_age_verdict(3600, tier) is CacheAge.TOO_OLD
