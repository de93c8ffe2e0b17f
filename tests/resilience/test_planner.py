"""The failover planner: invariants over random health, and the ordering rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import (
    BreakerSettings,
    HedgeSettings,
    PolicyConfig,
    RolePolicy,
)
from agent_failover.resilience.contracts import (
    BreakerState,
    HealthSnapshot,
    RouteHealth,
    WindowStats,
)
from agent_failover.resilience.plan import FailoverPlan, RequestFacts, SkipReason
from agent_failover.resilience.planner import plan
from agent_failover.resilience.sla import evaluate_sla
from tests.resilience.conftest import DEMO_POLICY
from tests.resilience.helpers import PROPERTY

NOW = 1_000_000.0
DEMO = load_policy(DEMO_POLICY, env={})
#: The demo's Claude-on-cloud standbys (tier 1, listed first).
CLOUD_STANDBYS = ("bedrock-us-west-2", "vertex-europe-west1")


def _classic(policy: PolicyConfig) -> PolicyConfig:
    """The demo policy with the five vendor-API routes only: the ordering rules below are
    stated on that small roster (two tier-1 routes); the cloud standbys have their own
    tests at the end. Half-open routes take real calls at the default share (0, the demo
    policy admits half): the ordering properties below state the default."""
    default_share = BreakerSettings().half_open_call_fraction
    breaker = policy.breaker.model_copy(update={"half_open_call_fraction": default_share})
    roles = {
        name: r.model_copy(
            update={
                "roster": r.roster.model_copy(
                    update={"tier1": [x for x in r.roster.tier1 if x not in CLOUD_STANDBYS]}
                )
            }
        )
        for name, r in policy.roles.items()
    }
    return policy.model_copy(update={"roles": roles, "breaker": breaker})


POLICY = _classic(DEMO)
ROUTES = POLICY.routes_for("researcher")


def health(route: str, **kw: object) -> RouteHealth:
    """A route's health with the given fields."""
    return RouteHealth(route=route, **kw)


def snap(*routes: RouteHealth) -> HealthSnapshot:
    """A snapshot holding the given routes (others default to healthy/closed)."""
    return HealthSnapshot(taken_at=NOW, routes={r.route: r for r in routes})


def facts(**kw: object) -> RequestFacts:
    """Request facts for a small request unless told otherwise."""
    kw.setdefault("input_tokens", 1000)
    kw.setdefault("max_output_tokens", 500)
    return RequestFacts(**kw)


def role(name: str = "critic", **update: object) -> RolePolicy:
    """A demo role with some fields replaced."""
    return POLICY.role(name).model_copy(update=update)


def routes_of(p: FailoverPlan) -> list[str]:
    return [a.route for a in p.attempts]


def slow_stats(p95: float) -> WindowStats:
    return WindowStats(calls=50, latency_samples=50, enough_samples=True, p95_ms=p95, p99_ms=p95)


# --- invariants ---------------------------------------------------------------------------

route_health = st.builds(
    lambda route, state, until_delta, p95, err, demoted, learned, cool: RouteHealth(
        route=route,
        breaker=state,
        open_until=NOW + until_delta if state is BreakerState.OPEN else None,
        stats=WindowStats(
            calls=50, latency_samples=50, enough_samples=True, error_rate=err,
            p95_ms=p95, p99_ms=p95, ttft_p95_ms=p95 / 4 if p95 else None,
        ),
        sla_demoted=demoted,
        context_window=learned,
        cooldown_until=NOW + cool if cool is not None else None,
    ),
    st.sampled_from(ROUTES),
    st.sampled_from(list(BreakerState)),
    st.floats(min_value=-60, max_value=60),
    st.one_of(st.none(), st.floats(min_value=10, max_value=20_000)),
    st.floats(min_value=0, max_value=1),
    st.booleans(),
    st.one_of(st.none(), st.sampled_from([32_000, 150_000, 2_000_000])),
    st.one_of(st.none(), st.floats(min_value=-30, max_value=30)),
)  # fmt: skip


@PROPERTY
@given(
    healths=st.lists(route_health, max_size=8),
    elapsed=st.floats(min_value=0, max_value=25_000),
    excluded=st.lists(st.sampled_from(ROUTES), max_size=3),
    cooling=st.dictionaries(st.sampled_from(ROUTES), st.floats(min_value=-30, max_value=30)),
    input_tokens=st.integers(min_value=0, max_value=300_000),
    min_input=st.one_of(st.none(), st.integers(min_value=0, max_value=50_000)),
    min_window=st.sampled_from([0, 100_000, 500_000]),
    hedging=st.builds(
        HedgeSettings,
        enabled=st.booleans(),
        delay_ms=st.one_of(st.none(), st.floats(min_value=1, max_value=5000)),
        max_hedges=st.integers(min_value=0, max_value=3),
    ),
    stateless=st.booleans(),
    role_name=st.sampled_from(sorted(POLICY.roles)),
)
def test_plan_invariants(
    healths, elapsed, excluded, cooling, input_tokens, min_input, min_window, hedging,
    stateless, role_name,
) -> None:  # fmt: skip
    """No blocked route is planned, static is always last, nothing starts past the budget."""
    r = role(role_name, hedging=hedging, stateless=stateless)
    snapshot = snap(*{h.route: h for h in healths}.values())
    f = facts(
        input_tokens=input_tokens,
        elapsed_ms=elapsed,
        exclude_routes=excluded,
        cooldowns={k: NOW + v for k, v in cooling.items()},
        min_input_tokens=min_input,
        min_context_window=min_window,
    )
    p = plan(r, POLICY, snapshot, f, NOW)
    remaining = max(r.total_budget_ms - elapsed, 0)

    assert p.static == r.roster.static
    assert p.explain()[-1].split(". ", 1)[1].startswith("static fallback")
    assert (p.cache is not None) == r.roster.cache.enabled
    planned = routes_of(p)
    assert len(planned) == len(set(planned))
    for a in p.attempts:
        h = snapshot.get(a.route)
        assert a.route not in excluded
        assert h.breaker is not BreakerState.FORCED_OPEN
        assert not (h.breaker is BreakerState.OPEN and NOW < h.open_until)
        assert not f.cooldowns.get(a.route, 0) > NOW
        assert not (h.cooldown_until or 0) > NOW
        assert (h.context_window or POLICY.endpoint(a.route).context_window) >= min_window
        if a.floor:  # a tier's one guaranteed attempt, past the budget, with the floor
            assert a.timeout_ms == min(r.live_tier_floor, r.attempt_timeout) and not a.hedge
        else:
            assert 0 <= a.worst_case_start_ms < remaining
            assert a.worst_case_start_ms + a.timeout_ms <= remaining + 1e-6
        assert a.timeout_ms <= r.attempt_timeout
        assert a.ttft_budget_ms <= a.timeout_ms
        if a.needs_triage:
            assert a.target_input_tokens is not None and a.target_input_tokens < input_tokens
    # The floor gives a tier one attempt, only when no attempt of it fits the budget.
    floored = [a.tier for a in p.attempts if a.floor]
    assert len(floored) == len(set(floored))
    assert not any(a.tier in floored for a in p.attempts if not a.floor)
    # Every roster route is accounted for: planned, or skipped with a reason.
    skipped = {s.route for s in p.skipped}
    assert set(r.roster.routes()) == set(planned) | skipped
    # Tier order holds among routes that were not demoted; demoted ones come last.
    live = [a for a in p.attempts if not a.sla_demoted]
    assert [a.tier for a in live] == sorted(a.tier for a in live)
    assert p.attempts[: len(live)] == live
    for tier in (0, 1, 2):
        kinds = [a.trial for a in live if a.tier == tier]
        assert kinds == sorted(kinds), "half-open trials must follow closed routes"
    # Default half_open_call_fraction 0: a half-open route takes a real call only when no
    # closed route was plannable at all (last resort before cache/static).
    if any(a.trial for a in p.attempts):
        assert all(a.trial for a in p.attempts)
    hedges = [a for a in p.attempts if a.hedge]
    if hedges:
        assert stateless and hedging.enabled
        assert len(hedges) <= hedging.max_hedges
        assert all(a.start_offset_ms > 0 for a in hedges)
        assert not p.attempts[0].hedge
    else:
        assert all(a.start_offset_ms == 0 for a in p.attempts)


@PROPERTY
@given(st.lists(st.floats(min_value=2400.0, max_value=3000.0), min_size=1, max_size=30))
def test_hysteresis_prevents_flapping_in_plans(p95s: list[float]) -> None:
    """Once demoted, a primary whose p95 oscillates in [0.8 x SLA, SLA] stays at the back."""
    r = role("critic", sla=role("critic").sla.model_copy(update={"p95_ms": 3000, "p99_ms": 3000}))
    demoted = evaluate_sla(False, slow_stats(3500), r.sla, POLICY.hysteresis_margin).demoted
    assert demoted
    for p95 in p95s:
        h = health("anthropic-us-east", stats=slow_stats(p95), sla_demoted=demoted)
        p = plan(r, POLICY, snap(h), facts(), NOW)
        first = p.attempts[0].route
        assert first != "anthropic-us-east"
        # What the store would persist for the next plan:
        demoted = evaluate_sla(demoted, h.stats, r.sla, POLICY.hysteresis_margin).demoted
        assert demoted


# --- rules ----------------------------------------------------------------------------------


def test_healthy_plan_follows_tiers() -> None:
    """With no health data the plan is tier 0, then tier 1, then tier 2 as budget allows."""
    r = role("critic", attempt_timeout_ms=3000)
    p = plan(r, POLICY, snap(), facts(), NOW)
    assert [a.tier for a in p.attempts] == [0, 1, 1, 2, 2]
    assert routes_of(p)[0] == "anthropic-us-east"


def test_open_breaker_is_skipped_with_reason() -> None:
    """An open primary is skipped; the reason names the breaker and its open_until."""
    h = health("anthropic-us-east", breaker=BreakerState.OPEN, open_until=NOW + 10,
               breaker_reason="error_rate")  # fmt: skip
    p = plan(role(), POLICY, snap(h), facts(), NOW)
    assert routes_of(p)[0] != "anthropic-us-east"
    [s] = [s for s in p.skipped if s.route == "anthropic-us-east"]
    assert s.code is SkipReason.BREAKER_OPEN and "open breaker (error_rate) until" in s.reason


def _with_trial_fraction(fraction: float) -> PolicyConfig:
    """The demo policy with ``breaker.half_open_call_fraction`` set."""
    b = POLICY.breaker.model_copy(update={"half_open_call_fraction": fraction})
    return POLICY.model_copy(update={"breaker": b})


ALL_TRIALS = _with_trial_fraction(1.0)


def test_open_past_open_until_is_a_trial_after_closed_routes() -> None:
    """An open breaker past open_until is a half-open trial, after its tier's closed routes."""
    a = health("anthropic-eu-west", breaker=BreakerState.OPEN, open_until=NOW - 1)
    b = health("openai-us", breaker=BreakerState.CLOSED)
    p = plan(role(attempt_timeout_ms=3000), ALL_TRIALS, snap(a, b), facts(), NOW)
    tier1 = [x for x in p.attempts if x.tier == 1]
    assert [x.route for x in tier1] == ["openai-us", "anthropic-eu-west"]
    assert tier1[1].trial and "half-open trial" in tier1[1].why


def test_half_open_even_with_better_score_goes_after_closed() -> None:
    """Half-open routes follow closed ones of the same tier whatever their score."""
    a = health("anthropic-eu-west", breaker=BreakerState.HALF_OPEN)
    worse = WindowStats(calls=20, error_rate=0.1, p95_ms=2900, latency_samples=20)
    b = health("openai-us", stats=worse)
    p = plan(role(attempt_timeout_ms=3000), ALL_TRIALS, snap(a, b), facts(), NOW)
    assert routes_of(p)[1:3] == ["openai-us", "anthropic-eu-west"]


def test_half_open_primary_takes_no_real_calls_by_default() -> None:
    """Default (probes only): a half-open tier-0 route is skipped while healthy standbys
    exist, instead of being tried with a user's call before them (the code before did)."""
    primary = health("anthropic-us-east", breaker=BreakerState.HALF_OPEN)
    p = plan(role(attempt_timeout_ms=3000), POLICY, snap(primary), facts(), NOW)
    assert "anthropic-us-east" not in routes_of(p)
    assert p.attempts[0].tier == 1 and not p.attempts[0].trial
    [s] = [s for s in p.skipped if s.route == "anthropic-us-east"]
    assert s.code is SkipReason.HALF_OPEN and "0%" in s.reason


def test_half_open_real_call_trials_follow_the_fraction() -> None:
    """With fraction f, a call whose ticket is below f is a trial in the route's tier slot."""
    primary = health("anthropic-us-east", breaker=BreakerState.HALF_OPEN)
    policy = _with_trial_fraction(0.25)
    r = role(attempt_timeout_ms=3000)
    drawn = plan(r, policy, snap(primary), facts(trial_ticket=0.2), NOW)
    assert drawn.attempts[0].route == "anthropic-us-east" and drawn.attempts[0].trial
    missed = plan(r, policy, snap(primary), facts(trial_ticket=0.3), NOW)
    assert "anthropic-us-east" not in routes_of(missed)
    tickets = [i / 100 for i in range(100)]
    trials = sum(
        plan(role(), policy, snap(primary), facts(trial_ticket=t), NOW).attempts[0].trial
        for t in tickets
    )
    assert trials == 25


def test_half_open_is_the_last_resort_before_cache_and_static() -> None:
    """With no closed route left, half-open routes are tried (a trial beats a static answer)."""
    routes = POLICY.role("critic").roster.routes()
    healths = [health(r, breaker=BreakerState.FORCED_OPEN) for r in routes[1:]]
    primary = health("anthropic-us-east", breaker=BreakerState.HALF_OPEN)
    p = plan(role(), POLICY, snap(primary, *healths), facts(), NOW)
    assert routes_of(p) == ["anthropic-us-east"] and p.attempts[0].trial


def test_forced_open_and_cooldown_and_exclusion() -> None:
    """Forced-open, cooling-down and excluded routes are all skipped with their reason."""
    h = health("anthropic-us-east", breaker=BreakerState.FORCED_OPEN)
    f = facts(
        cooldowns={"openai-us": NOW + 5, "cheap-mini": NOW - 5},
        exclude_routes=["anthropic-eu-west"],
    )
    p = plan(role(attempt_timeout_ms=3000), POLICY, snap(h), f, NOW)
    codes = {s.route: s.code for s in p.skipped}
    assert codes == {
        "anthropic-us-east": SkipReason.FORCED_OPEN,
        "openai-us": SkipReason.COOLING_DOWN,
        "anthropic-eu-west": SkipReason.EXCLUDED,
    }
    assert routes_of(p) == ["cheap-mini", "gemini-flash"]


def test_a_role_is_judged_on_its_own_latency_on_a_shared_route() -> None:
    """The route's p95 is 7.5 s (a slow role's calls), this role's own calls and probes
    900 ms, under its 4 s SLA: it keeps its primary first; with its own p95 at 7.5 s it is
    demoted (before: the route-wide percentiles demoted the route for every role)."""
    planner = role(attempt_timeout_ms=3000)
    assert planner.sla.p95_ms == 4000
    mixed = slow_stats(7500)
    own = health("anthropic-us-east", stats=mixed, role_stats=slow_stats(900))
    p = plan(planner, POLICY, snap(own), facts(), NOW)
    assert routes_of(p)[0] == "anthropic-us-east" and not p.attempts[0].sla_demoted
    slow = health("anthropic-us-east", stats=mixed, role_stats=slow_stats(7500))
    demoted = plan(planner, POLICY, snap(slow), facts(), NOW)
    assert demoted.attempts[-1].route == "anthropic-us-east" and demoted.attempts[-1].sla_demoted


def test_sla_demoted_primary_moves_to_the_back() -> None:
    """A primary breaching the SLA is tried last, not dropped (proactive substitution)."""
    h = health("anthropic-us-east", stats=slow_stats(9000))
    p = plan(role(attempt_timeout_ms=3000), POLICY, snap(h), facts(), NOW)
    assert routes_of(p)[-1] == "anthropic-us-east"
    assert p.attempts[-1].sla_demoted and p.attempts[-1].tier == 0
    assert any(s.code is SkipReason.SLA_DEMOTED and "sla" in s.reason for s in p.skipped)


def test_score_orders_within_a_tier() -> None:
    """Inside a tier the healthier route goes first."""
    sick = health("openai-us", stats=WindowStats(calls=20, error_rate=0.3, enough_samples=True))
    p = plan(role(attempt_timeout_ms=3000), POLICY, snap(sick), facts(), NOW)
    assert routes_of(p)[1:3] == ["anthropic-eu-west", "openai-us"]
    bad = WindowStats(calls=20, error_rate=0.3, enough_samples=True)
    sick2 = health("anthropic-eu-west", stats=bad)
    p = plan(role(attempt_timeout_ms=3000), POLICY, snap(sick2), facts(), NOW)
    assert routes_of(p)[1:3] == ["openai-us", "anthropic-eu-west"]


def test_context_window_triage_and_skip() -> None:
    """A small window needs triage to window - output; below the triage floor it is skipped."""
    r = role(attempt_timeout_ms=3000)
    p = plan(r, POLICY, snap(), facts(input_tokens=40_000, max_output_tokens=1000), NOW)
    [mini] = [a for a in p.attempts if a.route == "cheap-mini"]
    assert mini.needs_triage and mini.target_input_tokens == 31_000
    assert not any(a.needs_triage for a in p.attempts if a.route != "cheap-mini")
    p = plan(r, POLICY, snap(), facts(input_tokens=40_000, max_output_tokens=1000,
                                      min_input_tokens=35_000), NOW)  # fmt: skip
    [s] = [s for s in p.skipped if s.route == "cheap-mini"]
    assert s.code is SkipReason.CONTEXT_TOO_SMALL


def test_min_context_window_after_context_failure() -> None:
    """After a context-length failure only larger windows are planned."""
    p = plan(role(attempt_timeout_ms=3000), POLICY, snap(), facts(min_context_window=500_000), NOW)
    assert routes_of(p) == ["gemini-flash"]


def test_budget_bounds_attempts() -> None:
    """Attempts fill the budget in the worst case; the last gets what is left."""
    r = role("critic")  # total 15 s, attempt 6 s
    p = plan(r, POLICY, snap(), facts(), NOW)
    within = [a for a in p.attempts if not a.floor]
    assert [a.timeout_ms for a in within] == [6000, 6000, 3000]
    assert [a.worst_case_start_ms for a in within] == [0, 6000, 12000]
    assert {s.code for s in p.skipped} == {SkipReason.NO_BUDGET}
    # Tier 2 fits no more, so it keeps its one floor attempt after them.
    assert [(a.tier, a.timeout_ms) for a in p.attempts if a.floor] == [(2, r.ttft_budget_ms)]
    without_floor = r.model_copy(update={"live_tier_floor_ms": 0.0})
    p = plan(without_floor, POLICY, snap(), facts(elapsed_ms=14_000), NOW)
    assert p.attempts == [] and p.static == r.roster.static
    assert "static fallback" in p.explain()[-1]


def test_hedge_uses_measured_ttft_clamped() -> None:
    """The researcher hedges its standby after the primary's TTFT p95, clamped to [min, max]."""
    r = POLICY.role("researcher")  # min 200 ms, max 2000 ms
    for ttft, expected in ((800.0, 800.0), (50.0, 200.0), (9000.0, 2000.0)):
        h = health("anthropic-us-east", stats=WindowStats(ttft_p95_ms=ttft))
        p = plan(r, POLICY, snap(h), facts(), NOW)
        assert p.attempts[1].hedge and p.attempts[1].start_offset_ms == expected
        assert p.hedge_delay_ms == expected
        assert not p.attempts[2].hedge and p.attempts[2].start_offset_ms == 0


def test_configured_hedge_delay_and_stateful_roles() -> None:
    """A configured delay wins; a stateful role never hedges."""
    p = plan(POLICY.role("analyst"), POLICY, snap(), facts(), NOW)
    assert p.attempts[1].hedge and p.attempts[1].start_offset_ms == 1500
    stateful = POLICY.role("analyst").model_copy(update={"stateless": False})
    p = plan(stateful, POLICY, snap(), facts(), NOW)
    assert not any(a.hedge for a in p.attempts)
    assert any("not stateless" in n for n in p.notes)


def test_explain_lists_everything_in_order() -> None:
    """explain() shows attempts, skips, then cache and static last."""
    h = health("openai-us", breaker=BreakerState.OPEN, open_until=NOW + 30)
    lines = plan(POLICY.role("researcher"), POLICY, snap(h), facts(), NOW).explain()
    assert lines[0].startswith("plan for role 'researcher'")
    assert any("[HEDGE]" in line for line in lines)
    assert any(line.strip().startswith("skip tier1 openai-us: open breaker") for line in lines)
    assert "cache" in lines[-2] and "static fallback" in lines[-1]


@pytest.mark.parametrize("state", [BreakerState.CLOSED, BreakerState.FORCED_CLOSED])
def test_store_degraded_is_noted(state: BreakerState) -> None:
    """A plan made from a local view says so."""
    primary = health("anthropic-us-east", breaker=state)
    s = HealthSnapshot(taken_at=NOW, store_degraded=True, routes={primary.route: primary})
    p = plan(role(), POLICY, s, facts(), NOW)
    assert routes_of(p)[0] == "anthropic-us-east"
    assert any("local view" in n for n in p.notes)


def test_policy_fixture_matches(demo_policy: PolicyConfig) -> None:
    """The module-level policy equals the session fixture (same file, same env)."""
    assert demo_policy == DEMO and _classic(demo_policy) == POLICY


# --- the demo's cloud standbys --------------------------------------------------------------


def test_demo_cloud_standbys_follow_the_cheaper_standby_when_healthy() -> None:
    """All healthy: cost ranks openai-us first in tier 1; the equally priced Claude routes
    keep the roster's order, Bedrock, Vertex, then the other Anthropic region."""
    researcher = DEMO.role("researcher").model_copy(update={"attempt_timeout_ms": 3000})
    p = plan(researcher, DEMO, snap(), facts(), NOW)
    assert routes_of(p)[:5] == [
        "anthropic-us-east", "openai-us", "bedrock-us-west-2", "vertex-europe-west1",
        "anthropic-eu-west",
    ]  # fmt: skip


def test_demo_region_down_lands_on_the_same_model_in_another_cloud() -> None:
    """Primary open, openai-us cooling: the next attempt is Claude on Bedrock us-west-2."""
    down = health("anthropic-us-east", breaker=BreakerState.OPEN, open_until=NOW + 30)
    f = facts(cooldowns={"openai-us": NOW + 5})
    p = plan(DEMO.role("researcher"), DEMO, snap(down), f, NOW)
    first = p.attempts[0]
    assert first.route == "bedrock-us-west-2" and first.tier == 1
    assert DEMO.endpoint(first.route).family == DEMO.endpoint("anthropic-us-east").family


# --- learned context windows and shared cool-downs ------------------------------------------


def test_learned_window_beats_the_configured_one() -> None:
    """openai-us is configured with 128k; its provider said 32k: a request of 40k
    (untriageable) skips it with the learned window in the reason."""
    h = health("openai-us", context_window=32_000)
    f = facts(input_tokens=40_000, max_output_tokens=1000, min_input_tokens=40_000)
    p = plan(role(attempt_timeout_ms=3000), POLICY, snap(h), f, NOW)
    assert "openai-us" not in routes_of(p)
    [s] = [s for s in p.skipped if s.route == "openai-us"]
    assert s.code is SkipReason.CONTEXT_TOO_SMALL and "32000 tokens (learned)" in s.reason


def test_learned_window_sets_the_floor_after_a_failure() -> None:
    """min_context_window compares with the learned window: a route that told us 150k is
    skipped when 200k is required, though its configuration says 1M."""
    h = health("gemini-flash", context_window=150_000)
    p = plan(role(attempt_timeout_ms=3000), POLICY, snap(h), facts(min_context_window=200_001), NOW)
    assert "gemini-flash" not in routes_of(p)


def test_unconfigured_window_is_tried_not_assumed_small() -> None:
    """An endpoint without context_window is tried as-is with a 300k request (before: it
    was assumed to hold 128k and triaged or skipped), even after a context failure."""
    eps = {**POLICY.endpoints}
    eps["openai-us"] = eps["openai-us"].model_copy(update={"context_window": None})
    policy = POLICY.model_copy(update={"endpoints": eps})
    f = facts(input_tokens=300_000, max_output_tokens=1000, min_input_tokens=300_000)
    p = plan(role(attempt_timeout_ms=3000), policy, snap(), f, NOW)
    [a] = [a for a in p.attempts if a.route == "openai-us"]
    assert not a.needs_triage
    p = plan(role(attempt_timeout_ms=3000), policy, snap(), facts(min_context_window=250_000), NOW)
    assert "openai-us" in routes_of(p)


def test_shared_cooldown_in_the_snapshot_skips_the_route() -> None:
    """A 429 seen by any worker (RouteHealth.cooldown_until) keeps the route out until then."""
    h = health("anthropic-us-east", cooldown_until=NOW + 1.5)
    p = plan(role(attempt_timeout_ms=3000), POLICY, snap(h), facts(), NOW)
    [s] = [s for s in p.skipped if s.route == "anthropic-us-east"]
    assert s.code is SkipReason.COOLING_DOWN
    later = plan(role(attempt_timeout_ms=3000), POLICY, snap(h), facts(), NOW + 1.5)
    assert routes_of(later)[0] == "anthropic-us-east"
