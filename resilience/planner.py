"""The failover planner: (role policy, health snapshot, request facts, now) -> ordered plan.

:func:`plan` is a pure function the workflow calls before every attempt (re-planning
with what the previous attempts taught it: time spent, routes excluded, cool-downs, a
larger context window needed); the facts it reads and the plan it returns are the values
of :mod:`resilience.plan`. The rules, in order:

1. Tiers run in order 0, 1, 2; inside a tier closed routes go first, ranked by the
   weighted score (:mod:`resilience.scoring`), then half-open routes as trials.
   Half-open routes take real calls only for the sampled share of calls
   (``breaker.half_open_call_fraction``, default 0: probes alone decide), or when no
   closed route is left to plan (a trial beats the cache and the static fallback);
   otherwise they are skipped, so users do not carry a recovering route's risk.
2. Routes are skipped when measured below the role's ``min_quality`` by ``failover
   qualify`` (``unqualified``: the lock file's verdict), excluded by the caller, forced
   open, open (before ``open_until``), cooling down after a Retry-After (this call's, or
   the route's shared ``cooldown_until``), out of rate budget (a bucket of the route's endpoint or
   of the role's bulkhead, as the snapshot read it, cannot hold one more request of
   this size until it refills: ``RATE_BUDGET``, planned like a cool-down; a role that
   is not critical may not use a budget's reserve), or when their context window
   cannot hold the request even after triage; a route that can hold it only after
   triage is planned with ``needs_triage`` and a ``target_input_tokens``. The window is
   the one the provider stated in an earlier rejection (learned, in the snapshot) or
   else the configured one; a route with neither is tried as-is, never assumed small.
3. Routes whose rolling p95/p99 breach the role's SLA (evaluated with hysteresis from
   the route's stored ``sla_demoted`` flag) move to the end of the live attempts, not
   out of the plan: proactive substitution before any timeout happens. With the policy's
   ``cost_efficiency`` enabled, a route whose tokens per dollar fell under its share of
   the route's baseline (:mod:`resilience.cost_efficiency`) is demoted the same way, with
   the same skip code and a reason naming cost efficiency. Routes shadow
   evaluation marked ``QUALITY_REGRESSION`` for the role (:mod:`resilience.shadow`) move
   back the same way, with that reason.
4. Budget: each attempt's worst-case start is computed (sequential attempts start when
   every earlier attempt has used its full timeout; a hedge starts its delay after the
   attempt it hedges). No attempt starts at or past the role's total budget, every
   timeout is ``min(attempt timeout, budget left at its start)``, and an attempt left
   with less than the TTFT budget is not planned (it could not answer in time).
   Because the workflow re-plans after each failure with the real elapsed time, fast
   failures give later routes their turn. One exception, the live-tier floor: a tier
   (0, 1, 2) with a callable route that this call has not tried yet keeps one attempt of
   the role's ``live_tier_floor`` (default: its TTFT budget) even once the budget is
   spent, sequential and marked ``floor``, so time lost elsewhere (a worker killed
   mid-call, a slow first tier) never sends the call to the cache or the static fallback
   past a healthy standby. ``live_tier_floor_ms: 0`` makes the budget a hard limit.
5. Hedging (stateless roles with hedging enabled only): the attempts after the first,
   up to ``max_hedges``, are hedges starting ``delay`` after the previous attempt; the
   delay is configured or the primary's measured TTFT p95, clamped.
6. The cache tier (when enabled) and the static fallback always close the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_failover.resilience.budget import budget_wait
from agent_failover.resilience.config import PolicyConfig, RolePolicy
from agent_failover.resilience.config.gates import route_unqualified
from agent_failover.resilience.contracts import BreakerState, HealthSnapshot, RouteHealth
from agent_failover.resilience.cost_efficiency import evaluate_cost_efficiency
from agent_failover.resilience.plan import (
    FailoverPlan,
    PlannedAttempt,
    RequestFacts,
    SkippedRoute,
    SkipReason,
)
from agent_failover.resilience.scoring import RouteScore, request_cost, score_route
from agent_failover.resilience.sla import evaluate_sla

_TIER_NAMES = {0: "primary", 1: "hot standby", 2: "warm fallback"}


@dataclass(slots=True)
class _Candidate:
    """A route the plan may call, scored (internal: never serialized, so no validation)."""

    route: str
    tier: int
    score: RouteScore
    trial: bool
    demoted: bool
    demotion_reason: str | None
    needs_triage: bool
    target_input_tokens: int | None
    quality_regressed: bool = False


def _blocked(
    route: str,
    tier: int,
    health: RouteHealth,
    facts: RequestFacts,
    now: float,
    critical: bool = False,
) -> SkippedRoute | None:
    """Why the route may not be called now, or None."""
    if route in facts.exclude_routes:
        return SkippedRoute(
            route=route,
            tier=tier,
            code=SkipReason.EXCLUDED,
            reason="excluded: failed earlier in this call with an error no retry here can fix",
        )
    if health.breaker is BreakerState.FORCED_OPEN:
        return SkippedRoute(
            route=route, tier=tier, code=SkipReason.FORCED_OPEN, reason="forced open by an operator"
        )
    if health.breaker is BreakerState.OPEN and (
        health.open_until is None or now < health.open_until
    ):
        why = f" ({health.breaker_reason})" if health.breaker_reason else ""
        until = f" until {health.open_until:.3f}" if health.open_until is not None else ""
        return SkippedRoute(
            route=route,
            tier=tier,
            code=SkipReason.BREAKER_OPEN,
            reason=f"open breaker{why}{until}",
        )
    until = max(facts.cooldowns.get(route) or 0.0, health.cooldown_until or 0.0)
    if now < until:
        return SkippedRoute(
            route=route,
            tier=tier,
            code=SkipReason.COOLING_DOWN,
            reason=f"cooling down until {until:.3f} (Retry-After)",
        )
    return _out_of_budget(route, tier, health, facts, now, critical)


def _out_of_budget(
    route: str, tier: int, health: RouteHealth, facts: RequestFacts, now: float, critical: bool
) -> SkippedRoute | None:
    """Skip a route whose rate budget cannot take this request before it refills."""
    tokens = facts.input_tokens + facts.max_output_tokens
    wait, level = budget_wait(health.budgets, tokens=tokens, critical=critical, now=now)
    if level is None:
        return None
    return SkippedRoute(
        route=route,
        tier=tier,
        code=SkipReason.RATE_BUDGET,
        reason=f"rate budget: {level.describe()}, room for this call by {now + wait:.3f}",
    )


def _unqualified(route: str, tier: int, role: RolePolicy) -> SkippedRoute | None:
    """A route the lock file measured below the role's quality gates is never planned."""
    reason = route_unqualified(route, role)
    if reason is None:
        return None
    return SkippedRoute(route=route, tier=tier, code=SkipReason.UNQUALIFIED, reason=reason)


def _fit(
    route: str, tier: int, policy: PolicyConfig, facts: RequestFacts, health: RouteHealth
) -> tuple[SkippedRoute | None, bool, int | None]:
    """Does the request fit the route's window, and if only after triage, to what size?"""
    ep = policy.endpoint(route)
    # The provider's own statement beats the configuration; with neither, try the route.
    window = health.context_window or ep.context_window
    source = "learned" if health.context_window else "configured"
    if window is None:
        return None, False, None
    if window < facts.min_context_window:
        return (
            SkippedRoute(
                route=route,
                tier=tier,
                code=SkipReason.CONTEXT_TOO_SMALL,
                reason=(
                    f"context window too small: {window} tokens ({source}) < "
                    f"{facts.min_context_window} required after a context-length failure"
                ),
            ),
            False,
            None,
        )
    reserve = min(facts.max_output_tokens, ep.max_output_tokens)
    target = window - reserve
    if facts.input_tokens <= target:
        return None, False, None
    floor = facts.min_input_tokens or 0
    if target <= 0 or floor > target:
        return (
            SkippedRoute(
                route=route,
                tier=tier,
                code=SkipReason.CONTEXT_TOO_SMALL,
                reason=(
                    f"context window too small: {window} tokens ({source}) cannot hold "
                    f"{floor} input (after triage) + {reserve} output"
                ),
            ),
            False,
            None,
        )
    return None, True, target


def _hedge_delay(role: RolePolicy, primary: RouteHealth) -> tuple[float, str]:
    h = role.hedging
    if h.delay_ms is not None:
        raw, source = h.delay_ms, "configured"
    elif primary.stats.ttft_p95_ms is not None:
        raw, source = primary.stats.ttft_p95_ms, "primary's measured TTFT p95"
    else:
        # No measurement yet: half the TTFT budget leaves the hedge time to answer.
        raw, source = role.ttft_budget_ms / 2, "half the TTFT budget (no TTFT samples yet)"
    hi = h.max_delay_ms if h.max_delay_ms is not None else role.ttft_budget_ms
    delay = min(max(raw, h.min_delay_ms), max(hi, h.min_delay_ms))
    return delay, source


def plan(
    role: RolePolicy,
    policy: PolicyConfig,
    snapshot: HealthSnapshot,
    facts: RequestFacts,
    now: float,
) -> FailoverPlan:
    """Build the ordered failover plan for one call of ``role`` (see the module doc)."""
    skipped: list[SkippedRoute] = []
    costs = {
        r: request_cost(policy.endpoint(r), facts.input_tokens, facts.max_output_tokens)
        for r in role.roster.routes()
    }
    span = (min(costs.values(), default=0.0), max(costs.values(), default=0.0))
    tiers: list[tuple[list[_Candidate], list[_Candidate]]] = []
    for tier, routes in role.roster.tiers():
        closed: list[_Candidate] = []
        trials: list[_Candidate] = []
        for route in routes:
            cand = _candidate(route, tier, role, policy, snapshot, facts, now, costs, span, skipped)
            if cand is not None:
                (trials if cand.trial else closed).append(cand)
        tiers.append((closed, trials))
    any_closed = any(closed for closed, _ in tiers)
    ordered: list[_Candidate] = []
    demoted: list[_Candidate] = []
    for closed, trials in tiers:
        trials = [c for c in trials if _trial_allowed(c, policy, facts, any_closed, skipped)]
        for group in (closed, trials):
            # sorted() is stable: equal scores keep the roster's order.
            for cand in sorted(group, key=lambda c: -c.score.total):
                if cand.demoted or cand.quality_regressed:
                    demoted.append(cand)
                    skipped.append(_demotion(cand))
                else:
                    ordered.append(cand)
    ordered += demoted
    return _schedule(role, snapshot, facts, ordered, skipped)


def _demotion(cand: _Candidate) -> SkippedRoute:
    """The skip record of a candidate moved behind the healthy routes (SLA wins the code)."""
    if cand.demoted:
        return SkippedRoute(
            route=cand.route,
            tier=cand.tier,
            code=SkipReason.SLA_DEMOTED,
            reason=f"sla demoted: moved behind healthy routes ({cand.demotion_reason})",
        )
    return SkippedRoute(
        route=cand.route,
        tier=cand.tier,
        code=SkipReason.QUALITY_REGRESSION,
        reason="quality regression: shadow evaluation found its answers drifting from the "
        "reference route; moved behind healthy routes",
    )


def _candidate(
    route: str,
    tier: int,
    role: RolePolicy,
    policy: PolicyConfig,
    snapshot: HealthSnapshot,
    facts: RequestFacts,
    now: float,
    costs: dict[str, float],
    span: tuple[float, float],
    skipped: list[SkippedRoute],
) -> _Candidate | None:
    """The route as a scored candidate, or None (and a skip recorded) if it cannot be called."""
    health = snapshot.get(route)
    needs_triage, target = False, None
    block = _unqualified(route, tier, role)
    if block is None:
        block = _blocked(route, tier, health, facts, now, role.critical)
    if block is None:
        block, needs_triage, target = _fit(route, tier, policy, facts, health)
    if block is not None:
        skipped.append(block)
        return None
    demoted, reason = _demoted(role, policy, health, now)
    return _Candidate(
        route=route,
        tier=tier,
        score=score_route(
            route,
            health.stats,
            role.sla,
            policy.scoring,
            costs[route],
            *span,
        ),
        # OPEN past open_until is half-open in all but name: admit() moves it.
        trial=health.breaker in (BreakerState.HALF_OPEN, BreakerState.OPEN),
        demoted=demoted,
        demotion_reason=reason,
        quality_regressed=health.quality_regressed,
        needs_triage=needs_triage,
        target_input_tokens=target,
    )


def _demoted(
    role: RolePolicy, policy: PolicyConfig, health: RouteHealth, now: float
) -> tuple[bool, str | None]:
    """The SLA verdict, else the cost-efficiency one: both demote the same way."""
    verdict = evaluate_sla(
        health.sla_demoted,
        health.role_stats or health.stats,
        role.sla,
        policy.hysteresis_margin,
        recent=health.recent,
        since=health.sla_since,
        now=now,
    )
    if verdict.demoted:
        return True, verdict.reason
    cost = evaluate_cost_efficiency(
        health.cost, policy.cost_efficiency, policy.hysteresis_margin, now=now
    )
    if cost.demoted:
        return True, f"cost efficiency: {cost.reason}"
    return False, verdict.reason


def _trial_allowed(
    cand: _Candidate,
    policy: PolicyConfig,
    facts: RequestFacts,
    any_closed: bool,
    skipped: list[SkippedRoute],
) -> bool:
    """May this call be a half-open route's real-call trial? Records the skip if not."""
    fraction = policy.breaker_for(cand.route).half_open_call_fraction
    if not any_closed or facts.trial_ticket < fraction:
        return True
    skipped.append(
        SkippedRoute(
            route=cand.route,
            tier=cand.tier,
            code=SkipReason.HALF_OPEN,
            reason=(
                f"half-open: real-call trials limited to {fraction:.0%} of calls "
                "and this call was not drawn; probes decide while a closed route is left"
            ),
        )
    )
    return False


def _schedule(
    role: RolePolicy,
    snapshot: HealthSnapshot,
    facts: RequestFacts,
    ordered: list[_Candidate],
    skipped: list[SkippedRoute],
) -> FailoverPlan:
    """Lay the ranked candidates on the budget timeline, marking hedges."""
    budget = role.total_budget_ms
    remaining = max(budget - facts.elapsed_ms, 0.0)
    delay, notes = _hedging(role, snapshot, ordered)
    attempts: list[PlannedAttempt] = []
    free_at = 0.0  # worst case: when every attempt planned so far has finished
    prev_start = 0.0
    for i, cand in enumerate(ordered):
        hedge = delay is not None and 1 <= i <= role.hedging.max_hedges
        start = prev_start + delay if hedge and delay is not None else free_at
        left = remaining - start
        if left >= min(role.ttft_budget_ms, role.attempt_timeout):
            hedged = attempts[-1].route if hedge and attempts else None
            attempt = _attempt(role, cand, start, prev_start, left, hedge, hedged)
        elif _floor_due(role, cand, facts, attempts):
            start = free_at  # sequential: the floor is never a hedge
            floor = role.live_tier_floor
            attempt = _attempt(role, cand, start, prev_start, floor, False, None, floor=True)
        else:
            skipped.append(_no_budget(cand, start, left, budget))
            continue
        attempts.append(attempt)
        prev_start = start
        free_at = max(free_at, start + attempt.timeout_ms)
    return FailoverPlan(
        role=role.name,
        attempts=attempts,
        skipped=skipped,
        cache=role.roster.cache if role.roster.cache.enabled else None,
        static=role.roster.static,
        budget_ms=budget,
        remaining_ms=remaining,
        hedge_delay_ms=delay if any(a.hedge for a in attempts) else None,
        notes=notes,
    )


def _hedging(
    role: RolePolicy, snapshot: HealthSnapshot, ordered: list[_Candidate]
) -> tuple[float | None, list[str]]:
    """The hedge delay (None: no hedges in this plan) and the plan's notes about it."""
    notes: list[str] = []
    if snapshot.store_degraded:
        notes.append("health store unreachable: planned from this worker's local view")
    hedging = role.stateless and role.hedging.enabled and role.hedging.max_hedges > 0
    delay: float | None = None
    if hedging and len(ordered) > 1:
        delay, source = _hedge_delay(role, snapshot.get(ordered[0].route))
        notes.append(f"hedge delay {delay:.0f} ms ({source})")
    elif role.hedging.enabled and not role.stateless:
        notes.append("hedging disabled: the role is not stateless")
    return delay, notes


def _no_budget(cand: _Candidate, start: float, left: float, budget: float) -> SkippedRoute:
    """The skip record of a candidate that would start too late to answer in time."""
    return SkippedRoute(
        route=cand.route,
        tier=cand.tier,
        code=SkipReason.NO_BUDGET,
        reason=(
            f"no budget left: would start {start:.0f} ms from now with "
            f"{max(left, 0.0):.0f} ms of {budget:.0f} ms remaining"
        ),
    )


def _floor_due(
    role: RolePolicy, cand: _Candidate, facts: RequestFacts, attempts: list[PlannedAttempt]
) -> bool:
    """Does the candidate's tier still have its guaranteed attempt? (None made in this
    call and none planned yet, and the role keeps a floor.)"""
    if not facts.live_tier_floor or role.live_tier_floor <= 0:
        return False
    if cand.tier in facts.tiers_tried:
        return False
    return all(a.tier != cand.tier for a in attempts)


def _attempt(
    role: RolePolicy,
    cand: _Candidate,
    start: float,
    prev_start: float,
    left: float,
    hedge: bool,
    hedged: str | None,
    floor: bool = False,
) -> PlannedAttempt:
    """The candidate as an attempt starting ``start`` ms from now with ``left`` ms left
    (``floor``: its tier's guaranteed attempt, ``left`` being the role's floor)."""
    timeout = min(role.attempt_timeout, left)
    why = _why(cand, hedge, hedged)
    if floor:
        why += f"; live-tier floor: budget spent, tier {cand.tier} untried: {timeout:.0f} ms"
    return PlannedAttempt(
        route=cand.route,
        tier=cand.tier,
        start_offset_ms=start - prev_start if hedge else 0.0,
        timeout_ms=timeout,
        ttft_budget_ms=min(role.ttft_budget_ms, timeout),
        idle_budget_ms=min(role.idle_budget, timeout),
        hedge=hedge,
        needs_triage=cand.needs_triage,
        target_input_tokens=cand.target_input_tokens,
        score=cand.score.total,
        why=why,
        trial=cand.trial,
        sla_demoted=cand.demoted,
        worst_case_start_ms=start,
        floor=floor,
    )


def _why(cand: _Candidate, hedge: bool, hedged: str | None) -> str:
    parts = [f"tier{cand.tier} {_TIER_NAMES.get(cand.tier, 'route')}"]
    parts.append("half-open trial" if cand.trial else "closed")
    parts.append(cand.score.describe())
    if cand.demoted:
        parts.append(f"sla demoted, moved back ({cand.demotion_reason})")
    if cand.quality_regressed:
        parts.append("quality regression (shadow evaluation), moved back")
    if cand.needs_triage:
        parts.append(f"needs triage to {cand.target_input_tokens} input tokens")
    if hedge and hedged:
        parts.append(f"hedges {hedged}")
    return "; ".join(parts)
