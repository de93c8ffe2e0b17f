"""Shadow evaluation's pure decisions: sampling, the quality verdict and its hysteresis,
the planner demoting a quality-regressed route, and the degraded re-run's verdicts."""

from __future__ import annotations

import random

import pytest

from agent_failover.resilience.config import PolicyConfig, ShadowSettings
from agent_failover.resilience.contracts import (
    BreakerState,
    HealthSnapshot,
    RecentSample,
    RouteHealth,
)
from agent_failover.resilience.plan import RequestFacts, SkipReason
from agent_failover.resilience.planner import plan
from agent_failover.resilience.shadow import (
    QualitySample,
    QualityState,
    RerunStatus,
    evaluate_quality,
    is_sampled,
    primary_restored,
    rerun_verdict,
    shadow_targets,
)

T0 = 1_700_000_000.0
SETTINGS = ShadowSettings(
    reference_route="ref", tolerance=0.2, window_s=100.0, min_samples=5, restore_after=3
)
MARGIN = 0.8


def _state(scores: list[float], *, regressed: bool = False, since: float | None = None, start=T0):
    samples = [QualitySample(at=start + i, score=s) for i, s in enumerate(scores)]
    return QualityState(samples=samples, regressed=regressed, since=since)


def test_sampling_honours_the_fraction() -> None:
    """Uniform tickets are sampled at the configured rate (and never at 0, always at 1)."""
    rng = random.Random(7)
    tickets = [rng.random() for _ in range(20_000)]
    for fraction in (0.05, 0.3, 0.5):
        share = sum(is_sampled(t, fraction) for t in tickets) / len(tickets)
        assert share == pytest.approx(fraction, abs=0.015)
    assert not any(is_sampled(t, 0.0) for t in tickets)
    assert all(is_sampled(t, 1.0) for t in tickets)


def test_sustained_drop_beyond_tolerance_regresses() -> None:
    """Mean agreement 0.4 over min_samples samples (drop 0.6 > 0.2) marks the route."""
    v = evaluate_quality(_state([1, 0, 0, 1, 0]), SETTINGS, MARGIN, now=T0 + 10)
    assert v.regressed and v.delta == pytest.approx(0.6) and "tolerance" in v.reason


def test_drop_within_tolerance_or_too_few_samples_keeps_the_verdict() -> None:
    """One disagreement in ten is within tolerance; four bad samples are not evidence yet."""
    assert not evaluate_quality(_state([1] * 9 + [0]), SETTINGS, MARGIN, now=T0 + 20).regressed
    few = evaluate_quality(_state([0, 0, 0, 0]), SETTINGS, MARGIN, now=T0 + 10)
    assert not few.regressed and "min_samples" in few.reason
    kept = evaluate_quality(_state([1, 1], regressed=True), SETTINGS, MARGIN, now=T0 + 10)
    assert kept.regressed


def test_samples_outside_the_window_do_not_count() -> None:
    """Bad samples older than window_s are forgotten."""
    v = evaluate_quality(_state([0] * 5), SETTINGS, MARGIN, now=T0 + 500)
    assert not v.regressed and v.samples == 0


def test_regressed_route_is_restored_by_an_agreeing_streak() -> None:
    """restore_after agreeing samples in a row since the demotion restore it (the SLA rule)."""
    state = _state([0, 0, 0, 0, 0, 1, 1, 1], regressed=True, since=T0 + 4.5)
    v = evaluate_quality(state, SETTINGS, MARGIN, now=T0 + 10)
    assert not v.regressed and "restored" in v.reason
    two = _state([0, 0, 0, 0, 0, 1, 1], regressed=True, since=T0 + 4.5)
    assert evaluate_quality(two, SETTINGS, MARGIN, now=T0 + 10).regressed


def test_hysteresis_between_the_lines_keeps_regressed() -> None:
    """Since the demotion: a drop of 0.18 is under the tolerance (0.2) but not under
    margin x tolerance (0.16), and no streak of 3: still regressed. Below 0.16: restored."""
    scores = [1, 1, 0.4, 1, 1, 0.7, 1]  # drop 0.129 < 0.16, but no streak of 3
    between = [0.82] * 5  # drop 0.18, each sample under the good line (0.84)
    v = evaluate_quality(
        _state(between, regressed=True, since=T0 - 1), SETTINGS, MARGIN, now=T0 + 9
    )
    assert v.regressed and "still regressed" in v.reason
    restored = evaluate_quality(
        _state(scores, regressed=True, since=T0 - 1), SETTINGS, MARGIN, now=T0 + 9
    )
    assert not restored.regressed
    fresh = evaluate_quality(_state(between), SETTINGS, MARGIN, now=T0 + 9)
    assert not fresh.regressed  # never demoted: 0.18 is within the tolerance


def test_samples_before_a_verdict_change_do_not_count_against_it() -> None:
    """The bad samples that demoted a route cannot re-demote it right after it was restored."""
    state = _state([0, 0, 0, 0, 0, 1, 1, 1], since=T0 + 7.5)
    v = evaluate_quality(state, SETTINGS, MARGIN, now=T0 + 10)
    assert not v.regressed and v.samples == 0


def test_shadow_targets_add_regressed_routes_but_never_the_reference() -> None:
    """The answering route plus regressed roster routes are graded; the reference is not."""
    roster = ["a", "b", "ref", "c"]
    assert shadow_targets("a", "ref", ["c"], roster) == ["a", "c"]
    assert shadow_targets("ref", "ref", [], roster) == []
    assert shadow_targets("a", "ref", ["a", "zzz"], roster) == ["a"]


def test_planner_moves_a_quality_regressed_route_last(demo_policy: PolicyConfig) -> None:
    """A route marked QUALITY_REGRESSION is planned behind the healthy routes with that reason;
    a healthy route is not touched."""
    role = demo_policy.role("planner")
    primary = role.roster.tier0[0]
    snap = HealthSnapshot(
        taken_at=T0, routes={primary: RouteHealth(route=primary, quality_regressed=True)}
    )
    p = plan(role, demo_policy, snap, RequestFacts(input_tokens=100, max_output_tokens=100), T0)
    routes = [a.route for a in p.attempts]
    assert routes[0] != primary
    # Moved behind every healthy route (or out of the budget timeline altogether).
    assert primary not in routes or routes[-1] == primary
    skip = next(s for s in p.skipped if s.route == primary)
    assert skip.code is SkipReason.QUALITY_REGRESSION
    healthy = plan(
        role,
        demo_policy,
        HealthSnapshot(taken_at=T0),
        RequestFacts(input_tokens=100, max_output_tokens=100),
        T0,
    )
    assert healthy.attempts[0].route == primary
    assert not any(s.code is SkipReason.QUALITY_REGRESSION for s in healthy.skipped)


def test_primary_restored_needs_a_closed_undemoted_tier0(demo_policy: PolicyConfig) -> None:
    """Open, SLA-demoted, quality-regressed, cooling-down or just-failed primaries are not
    restored; a success after the failure restores it."""
    role = demo_policy.role("planner")
    primary = role.roster.tier0[0]
    assert primary_restored(role, HealthSnapshot(taken_at=T0), T0) == primary
    for bad in (
        {"breaker": BreakerState.OPEN},
        {"sla_demoted": True},
        {"quality_regressed": True},
        {"cooldown_until": T0 + 5},
    ):
        snap = HealthSnapshot(taken_at=T0, routes={primary: RouteHealth(route=primary, **bad)})
        assert primary_restored(role, snap, T0) is None, bad
    failed_last = RouteHealth(
        route=primary,
        recent=[
            RecentSample(at=T0 - 2, latency_ms=5, ok=True),
            RecentSample(at=T0 - 1, latency_ms=5, ok=False),
        ],
    )
    snap = HealthSnapshot(taken_at=T0, routes={primary: failed_last})
    assert primary_restored(role, snap, T0) is None  # just failed, breaker not tripped yet
    good_again = failed_last.model_copy(
        update={"recent": [*failed_last.recent, RecentSample(at=T0, latency_ms=5, ok=True)]}
    )
    snap = HealthSnapshot(taken_at=T0, routes={primary: good_again})
    assert primary_restored(role, snap, T0) == primary


def test_rerun_verdict() -> None:
    """Agreement at or above min_agreement revises; below escalates."""
    assert rerun_verdict(0.7, 0.7) is RerunStatus.REVISED
    assert rerun_verdict(0.69, 0.7) is RerunStatus.ESCALATED


def test_shadow_and_rerun_settings_are_validated(demo_policy: PolicyConfig) -> None:
    """An unknown reference or judge route names its field; a judge needs a route; re-runs
    refuse a judge (they are graded in workflow code)."""
    from agent_failover.resilience.config import PolicyError, RerunSettings
    from agent_failover.resilience.quality import ScorerSpec

    with pytest.raises(ValueError, match="judge_route"):
        ShadowSettings(reference_route="openai-us", scorer=ScorerSpec(kind="judge"))
    with pytest.raises(ValueError, match="not supported for degraded re-runs"):
        RerunSettings(scorer=ScorerSpec(kind="judge", judge_route="openai-us"))
    role = demo_policy.role("analyst").model_copy(
        update={
            "shadow": ShadowSettings(
                reference_route="gpt-x",
                scorer=ScorerSpec(kind="judge", judge_route="judge-x"),
            )
        }
    )
    data = demo_policy.model_dump()
    data["roles"]["analyst"] = role.model_dump()
    with pytest.raises(PolicyError) as info:
        PolicyConfig.model_validate(data)
    paths = {p for p, _ in info.value.errors}
    assert {
        "roles.analyst.shadow.reference_route",
        "roles.analyst.shadow.scorer.judge_route",
    } <= paths


def test_role_subset_keeps_the_reference_route(demo_policy: PolicyConfig) -> None:
    """The policy sent to workflows keeps the shadow reference even outside the roster."""
    analyst = demo_policy.role("analyst")
    role = analyst.model_copy(
        update={
            "roster": analyst.roster.model_copy(
                update={"tier0": ["anthropic-us-east"], "tier1": [], "tier2": []}
            ),
            "shadow": ShadowSettings(reference_route="openai-us"),
        }
    )
    cfg = demo_policy.model_copy(update={"roles": {**demo_policy.roles, "analyst": role}})
    assert set(cfg.checked_subset_for("analyst").endpoints) == {"anthropic-us-east", "openai-us"}
