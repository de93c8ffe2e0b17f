"""Qualification verdicts, the lock models, the CI gate, and the planner's UNQUALIFIED skip."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_failover.config.loader import load_policy
from agent_failover.resilience.config.gates import gate_failures
from agent_failover.resilience.contracts import HealthSnapshot
from agent_failover.resilience.plan import RequestFacts, SkipReason
from agent_failover.resilience.planner import plan
from agent_failover.resilience.qualification import (
    GoldenItem,
    ItemResult,
    QualificationLock,
    RoleQualification,
    RouteQualification,
    golden_hash,
    summarize_route,
    threshold,
    unqualified_reason,
)
from tests.resilience.conftest import DEMO_POLICY

NOW = 1_000_000.0
DEMO = load_policy(DEMO_POLICY, env={})


def _row(score: float, ms: float | None = 10.0, ok: bool = True, schema: bool | None = None):
    return ItemResult(
        item_id="x", route="r", ok=ok, latency_ms=ms if ok else None, score=score,
        passed=score >= 0.5, schema_ok=schema,
    )  # fmt: skip


def _verdict(quality: float, items: int = 10) -> RouteQualification:
    return RouteQualification(
        quality=quality, pass_rate=quality, items=items, errors=0, qualified=quality >= 0.85
    )


def _entry(**routes: float) -> RoleQualification:
    return RoleQualification(
        golden_set="analyst.jsonl",
        golden_hash="0123456789abcdef",
        scorer="normalized",
        min_quality=0.85,
        qualified_at="2026-11-30T12:00:00+00:00",
        routes={r.replace("_", "-"): _verdict(q) for r, q in routes.items()},
    )


def test_summarize_route_counts_errors_as_zero_and_takes_nearest_rank() -> None:
    """Quality is the mean over every item (an error scores 0); p50/p95 come from the
    answered items only; schema compliance is over all items."""
    rows = [_row(1.0, 10, schema=True), _row(1.0, 30, schema=True), _row(0.0, 20, schema=False)]
    rows.append(_row(0.0, ok=False))
    v = summarize_route(rows, model="m", min_quality=0.5, with_schema=True)
    assert (v.quality, v.pass_rate, v.items, v.errors) == (0.5, 0.5, 4, 1)
    assert (v.latency_p50_ms, v.latency_p95_ms) == (20.0, 30.0)
    assert v.schema_compliance == 0.5 and v.qualified
    assert not summarize_route(rows, model="m", min_quality=0.6, with_schema=False).qualified
    empty = summarize_route([], model="m", min_quality=0.0, with_schema=False)
    assert not empty.qualified and empty.latency_p50_ms is None


def test_golden_hash_is_stable_and_content_sensitive() -> None:
    """Same items, same hash; any change (even the expected answer) changes it."""
    a = [GoldenItem(id="1", prompt="Compute 1 + 1", expected="2")]
    b = [GoldenItem(id="1", prompt="Compute 1 + 1", expected="3")]
    assert golden_hash(a) == golden_hash(list(a)) != golden_hash(b)


def test_golden_item_bounds() -> None:
    """Golden items are bounded (they enter workflow history) and need an id and prompt."""
    with pytest.raises(ValidationError, match="prompt"):
        GoldenItem(id="1", prompt="")
    with pytest.raises(ValidationError, match="expected answer longer"):
        GoldenItem(id="1", prompt="p", expected="x" * 20_000)


def test_threshold_is_the_stricter_of_role_and_lock() -> None:
    """A route must reach the role's min_quality and the lock's threshold alike."""
    entry = _entry(a=0.9)
    assert threshold(0.0, entry) == 0.85 and threshold(0.95, entry) == 0.95
    assert threshold(0.5, entry) == 0.85
    assert unqualified_reason("a", 0.0, entry) is None
    reason = unqualified_reason("a", 0.95, entry)
    assert reason is not None and "quality 0.90 < min_quality 0.95" in reason
    assert "analyst.jsonl" in reason and "0123456789abcdef" in reason
    assert unqualified_reason("unmeasured", 0.95, entry) is None
    assert unqualified_reason("a", 0.95, None) is None


def test_gate_needs_a_qualified_fallback() -> None:
    """The CI gate passes with one qualified tier-1/2 route, fails without one, and fails a
    role that has no fallback at all."""
    base = DEMO.role("analyst")
    role = base.model_copy(
        update={
            "roster": base.roster.model_copy(
                update={"tier0": ["p"], "tier1": ["s"], "tier2": ["c"]}
            )
        }
    )

    def gate(entry: RoleQualification, r=role) -> list[str]:
        return gate_failures(r.model_copy(update={"qualification": entry}))

    assert gate(_entry(p=1.0, s=0.5, c=0.9)) == []
    [problem] = gate(_entry(p=1.0, s=0.5, c=0.2))
    assert "no qualified fallback" in problem and "s: " in problem and "c: " in problem
    problems = gate(_entry(p=0.1, s=0.1, c=0.1))
    assert any("no route qualifies" in p for p in problems)
    alone = role.model_copy(
        update={"roster": role.roster.model_copy(update={"tier1": [], "tier2": []})}
    )
    assert gate(_entry(p=1.0), alone) == [
        "role 'analyst': has no fallback route (tier1/tier2 are empty)"
    ]


def test_lock_with_role_keeps_other_roles() -> None:
    """Writing one role's entry keeps every other role's."""
    lock = QualificationLock().with_role("a", _entry(x=1.0)).with_role("b", _entry(y=0.1))
    assert set(lock.with_role("a", _entry(z=0.5)).roles) == {"a", "b"}
    with pytest.raises(ValidationError):
        QualificationLock(version=2)


def _plan(policy, role: str):
    snapshot = HealthSnapshot(taken_at=NOW, routes={})
    facts = RequestFacts(input_tokens=100, max_output_tokens=100)
    return plan(policy.role(role), policy, snapshot, facts, NOW)


def test_planner_never_plans_an_unqualified_route_and_says_why() -> None:
    """A route below min_quality is skipped (UNQUALIFIED, with the measured quality) in
    every tier, the primary included; unmeasured routes and other roles are untouched."""
    entry = _entry(anthropic_us_east=0.5, cheap_mini=0.3, openai_us=0.9)
    policy = DEMO.with_qualification(QualificationLock(roles={"analyst": entry}))
    p = _plan(policy, "analyst")
    planned = [a.route for a in p.attempts]
    assert "anthropic-us-east" not in planned and "cheap-mini" not in planned
    assert planned[0] == "openai-us"  # tier 1 now leads; budget decides how many follow
    skips = {s.route: s for s in p.skipped if s.code is SkipReason.UNQUALIFIED}
    assert set(skips) == {"anthropic-us-east", "cheap-mini"}
    assert "quality 0.30 < min_quality 0.85" in skips["cheap-mini"].reason
    assert any("unqualified: quality 0.50" in line for line in p.explain())
    assert "anthropic-us-east" in [a.route for a in _plan(policy, "researcher").attempts]


def test_roles_min_quality_tightens_the_lock() -> None:
    """Raising the role's min_quality excludes a route the lock had qualified."""
    entry = _entry(openai_us=0.9)
    policy = DEMO.with_qualification(QualificationLock(roles={"analyst": entry}))
    role = policy.role("analyst").model_copy(update={"min_quality": 0.95})
    policy = policy.model_copy(update={"roles": {**policy.roles, "analyst": role}})
    assert "openai-us" not in [a.route for a in _plan(policy, "analyst").attempts]


def test_with_qualification_warns_about_unknown_roles_and_routes() -> None:
    """Lock entries for roles or routes the policy lacks are ignored with a warning."""
    lock = QualificationLock(roles={"ghost": _entry(a=1.0), "analyst": _entry(nowhere=1.0)})
    policy = DEMO.with_qualification(lock)
    assert any("role 'ghost'" in w for w in policy.warnings)
    assert any("nowhere" in w for w in policy.warnings)
    assert policy.role("analyst").qualification is not None


def test_qualified_subset_round_trips_through_history() -> None:
    """The role context sent to workflows keeps the verdicts (checked_subset_for)."""
    policy = DEMO.with_qualification(QualificationLock(roles={"analyst": _entry(cheap_mini=0.3)}))
    sub = policy.checked_subset_for("analyst")
    assert sub.role("analyst").qualification == policy.role("analyst").qualification
