"""Quality gates on the qualification lock: relative score, schema, latency, freshness."""

from __future__ import annotations

from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.config.evaluation import (
    DEFAULT_RELATIVE_MIN_SCORE,
    QualityGates,
)
from agent_failover.resilience.config.gates import (
    gate_failures,
    role_fingerprint,
    route_unqualified,
    with_verdicts,
)
from agent_failover.resilience.contracts import HealthSnapshot
from agent_failover.resilience.plan import RequestFacts, SkipReason
from agent_failover.resilience.planner import plan
from agent_failover.resilience.qualification import (
    QualificationLock,
    RoleQualification,
    RouteQualification,
    stale_reasons,
)
from tests.resilience.conftest import DEMO_POLICY

NOW = 1_000_000.0
DEMO = load_policy(DEMO_POLICY, env={})
PRIMARY = "anthropic-us-east"


def _v(quality: float, schema: float | None = None, p50: float | None = 50.0):
    return RouteQualification(
        quality=quality, pass_rate=quality, items=20, errors=0, schema_compliance=schema,
        latency_p50_ms=p50, latency_p95_ms=p50, qualified=True,
    )  # fmt: skip


def _entry(role: str = "analyst", **routes: RouteQualification) -> RoleQualification:
    return RoleQualification(
        golden_set=f"{role}.jsonl",
        golden_hash="0123456789abcdef",
        scorer="normalized",
        min_quality=0.0,  # what `failover qualify` writes without --min-quality
        qualified_at="2026-12-01T12:00:00+00:00",
        routes={r.replace("_", "-"): v for r, v in routes.items()},
        fingerprint=role_fingerprint(DEMO.role(role)),
    )


def _policy(role: str, entry: RoleQualification, **gates: object) -> PolicyConfig:
    policy = DEMO.with_qualification(QualificationLock(roles={role: entry}))
    if gates:
        r = policy.role(role)
        r = r.model_copy(update={"quality_gates": r.quality_gates.model_copy(update=gates)})
        policy = policy.model_copy(update={"roles": {**policy.roles, role: r}})
    return policy


def _planned(policy: PolicyConfig, role: str) -> tuple[list[str], dict[str, str]]:
    snapshot = HealthSnapshot(taken_at=NOW, routes={})
    facts = RequestFacts(input_tokens=100, max_output_tokens=100)
    p = plan(policy.role(role), policy, snapshot, facts, NOW)
    skips = {s.route: s.reason for s in p.skipped if s.code is SkipReason.UNQUALIFIED}
    return [a.route for a in p.attempts], skips


def test_defaults_are_the_seeds() -> None:
    """A fallback needs 85 % of the primary's golden score; latency is gated; a stale lock
    still applies unless require_fresh."""
    g = QualityGates()
    assert g.relative_min_score == DEFAULT_RELATIVE_MIN_SCORE == 0.85
    assert g.latency_gate and g.max_p50_ms is None and not g.require_fresh
    assert DEMO.role("analyst").quality_gates == g


def test_a_fallback_needs_85_percent_of_the_primarys_score_on_the_same_set() -> None:
    """Relative, not absolute: with the primary at 1.00, 0.85 qualifies and 0.80 does not;
    with the primary at 0.60, 0.52 qualifies (87 %), although it is below 0.85."""
    entry = _entry(anthropic_us_east=_v(1.0), openai_us=_v(0.85), cheap_mini=_v(0.80))
    _, skips = _planned(_policy("analyst", entry), "analyst")
    assert "openai-us" not in skips and "cheap-mini" in skips
    assert "0.80 < 85% of the primary's 1.00 on golden set analyst.jsonl" in skips["cheap-mini"]
    weak = _entry(anthropic_us_east=_v(0.6), openai_us=_v(0.52), cheap_mini=_v(0.50))
    _, skips = _planned(_policy("analyst", weak), "analyst")
    assert set(skips) == {"cheap-mini"}
    _, none = _planned(_policy("analyst", entry, relative_min_score=0.0), "analyst")
    assert none == {}


def test_schema_compliance_and_median_latency_gate_a_route() -> None:
    """A route with 0 % schema compliance, or a 9 s median against the planner's 4 s SLA,
    is not qualified however well it scores; the latency gate can be turned off."""
    entry = _entry(
        "planner",
        anthropic_us_east=_v(1.0, schema=1.0),
        openai_us=_v(1.0, schema=0.0),
        gemini_flash=_v(1.0, schema=1.0, p50=9000.0),
        cheap_mini=_v(1.0, schema=1.0, p50=3000.0),
    )
    _, skips = _planned(_policy("planner", entry), "planner")
    assert "schema compliance 0% < 95%" in skips["openai-us"]
    assert "p50 latency 9000 ms > SLA 4000 ms" in skips["gemini-flash"]
    assert "cheap-mini" not in skips
    _, skips = _planned(_policy("planner", entry, latency_gate=False), "planner")
    assert set(skips) == {"openai-us"}
    _, skips = _planned(_policy("planner", entry, max_p50_ms=2000.0), "planner")
    assert "p50 latency 3000 ms > SLA 2000 ms" in skips["cheap-mini"]


def test_a_stale_lock_qualifies_nothing_with_require_fresh() -> None:
    """A lock whose recorded prompt hash differs is stale; it still applies by default,
    and with require_fresh every route it measured is skipped as unqualified."""
    entry = _entry(anthropic_us_east=_v(1.0), openai_us=_v(0.95))
    changed = entry.model_copy(update={"fingerprint": {**entry.fingerprint, "system_prompt": "x"}})
    assert stale_reasons(entry, role_fingerprint(DEMO.role("analyst")), None) == []
    policy = _policy("analyst", changed)
    assert policy.role("analyst").qualification.stale == ["system prompt changed"]
    planned, skips = _planned(policy, "analyst")
    assert skips == {} and planned[0] == PRIMARY
    planned, skips = _planned(_policy("analyst", changed, require_fresh=True), "analyst")
    assert set(skips) == {PRIMARY, "openai-us"} and PRIMARY not in planned
    assert "stale qualification (system prompt changed)" in skips[PRIMARY]


def test_gate_failures_and_verdicts_use_every_gate() -> None:
    """The CI gate and the lock's `qualified` flags apply the same gates as the planner."""
    entry = _entry(anthropic_us_east=_v(1.0), openai_us=_v(0.5), cheap_mini=_v(0.4))
    role = _policy("analyst", entry).role("analyst")
    [problem] = gate_failures(role)
    assert "no qualified fallback" in problem and "< 85% of the primary's" in problem
    flags = {r: v.qualified for r, v in with_verdicts(role, entry).routes.items()}
    assert flags == {PRIMARY: True, "openai-us": False, "cheap-mini": False}
    assert route_unqualified("gemini-flash", role) is None  # not measured: planned
    unlocked = DEMO.role("analyst")
    assert gate_failures(unlocked) == ["role 'analyst': not qualified (no lock entry)"]
