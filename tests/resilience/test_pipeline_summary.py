"""The run summary's words mean one thing: "substitutions" counts every step not answered
by a tier-0 route (standby, smaller model, cache, static, human), whatever failed first."""

from __future__ import annotations

from agent_failover.resilience.contracts import AgentOutput, AttemptRecord, Capability
from agent_failover.resilience.pipeline import SUBSTITUTIONS_LEGEND, is_substituted, summarize


def _out(tier: int, capability: Capability, *, route: str | None = "r", failed: int = 0):
    attempts = [
        AttemptRecord(route=f"x{i}", tier=0, started_at=0.0, outcome="server_error")
        for i in range(failed)
    ]
    attempts += [AttemptRecord(route="skip", tier=0, started_at=0.0, outcome="skipped")]
    return AgentOutput(
        role="r", content="c", capability=capability, tier=tier, route=route,
        confidence=0.5, attempts=attempts,
    )  # fmt: skip


def test_all_static_counts_every_step() -> None:
    """A run answered entirely by static fallbacks (every route skipped) is 4 of 4."""
    steps = [(f"s{i}", _out(3, Capability.STATIC, route=None)) for i in range(4)]
    s = summarize(steps)
    assert s.substitutions == 4 and s.failed_attempts == 0 and s.failover_count == 4


def test_tier0_after_a_failed_attempt_is_not_a_substitution() -> None:
    """Failed attempts are counted apart; a tier-0 answer is not a substitution."""
    s = summarize([("a", _out(0, Capability.FULL, failed=2)), ("b", _out(0, Capability.FULL))])
    assert s.substitutions == 0 and s.failed_attempts == 2 and s.failover_count == 1


def test_standby_smaller_cache_and_human_are_substitutions() -> None:
    outs = [
        _out(1, Capability.FULL),
        _out(2, Capability.DEGRADED),
        _out(3, Capability.DEGRADED),  # cache
        _out(0, Capability.FULL, route="human"),
    ]
    assert all(is_substituted(o) for o in outs)
    assert summarize([(str(i), o) for i, o in enumerate(outs)]).substitutions == 4


def test_legend_says_what_is_counted() -> None:
    for word in ("tier-0", "standby", "smaller model", "cache", "static", "human"):
        assert word in SUBSTITUTIONS_LEGEND
