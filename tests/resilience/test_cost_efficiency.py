"""Cost efficiency: useful tokens per dollar against the route's own 7-day baseline, the
verdict with hysteresis, and the planner demoting on it exactly as on an SLA breach."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.aggregates import minute_of
from agent_failover.resilience.baseline import HORIZON_HOURS, hour_of
from agent_failover.resilience.config import CostEfficiencySettings, PolicyConfig
from agent_failover.resilience.contracts import CallOutcome, CostEfficiency, HealthSnapshot
from agent_failover.resilience.cost_efficiency import (
    CostLedger,
    cost_fields,
    evaluate_cost_efficiency,
)
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.plan import SkipReason
from agent_failover.resilience.planner import plan
from tests.resilience.test_planner import POLICY, ROUTES, facts

HOUR = 472_222 * 3600.0
ON = CostEfficiencySettings(enabled=True)
MARGIN = 0.8  # the policy's default hysteresis margin
PRICE, TOKENS = 0.002, 1000  # every attempt below: 1000 tokens for $0.002


def eff(share: float, *, attempts: int = 50, demoted: bool = False, at: float = HOUR):
    """Figures whose current tokens per dollar is ``share`` of a 1000 tokens/$ baseline."""
    return CostEfficiency(
        current_attempts=attempts,
        current_tokens=round(1000 * share * 10),
        current_spend_usd=10.0,
        baseline_attempts=500,
        baseline_tokens=100_000,
        baseline_spend_usd=100.0,
        window_s=600.0,
        computed_at=at,
        demoted=demoted,
        since=at - 1000 if demoted else None,
    )


def test_billed_rejection_counts_spend_not_tokens() -> None:
    """An answer adds its tokens and spend; a rejected billed body its spend only; a probe
    or an attempt nobody billed adds nothing."""
    ans = CallOutcome(route="r", at=HOUR, ok=True, tokens=300, cost_usd=0.0015)
    bad = ans.model_copy(update={"ok": False, "error_class": ErrorClass.EMPTY_OUTPUT})
    assert cost_fields(ans) == {"b": 1, "k": 300, "n": 1_500_000}
    assert cost_fields(bad) == {"b": 1, "k": 0, "n": 1_500_000}
    assert cost_fields(ans.model_copy(update={"probe": True})) == {}
    assert cost_fields(ans.model_copy(update={"cost_usd": 0.0})) == {}


def test_off_by_default_never_demotes() -> None:
    """The default policy tracks the figures but demotes nothing, at the seed's 50 %."""
    default = PolicyConfig.model_fields["cost_efficiency"].default_factory()
    assert not default.enabled and default.min_share == 0.5
    verdict = evaluate_cost_efficiency(eff(0.1, demoted=True), default, MARGIN, now=HOUR)
    assert not verdict.demoted and verdict.share == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("share", "prev", "demoted"),
    [
        (0.49, False, True),  # under the line: demoted
        (0.55, False, False),  # over the line, not demoted before: stays
        (0.55, True, True),  # between 0.5 and 0.5 / 0.8 = 0.625: the verdict holds
        (0.62, True, True),
        (0.63, True, False),  # at the restore line: restored
        (1.2, True, False),
    ],
)
def test_hysteresis_between_the_lines(share: float, prev: bool, demoted: bool) -> None:
    """Demoted under min_share, restored only at min_share / hysteresis_margin."""
    verdict = evaluate_cost_efficiency(eff(share, demoted=prev), ON, MARGIN, now=HOUR)
    assert verdict.demoted is demoted


def test_too_few_billed_attempts_keep_the_verdict() -> None:
    """Under min_samples the ratio decides nothing, either way."""
    few = ON.min_samples - 1
    assert not evaluate_cost_efficiency(eff(0.1, attempts=few), ON, MARGIN, now=HOUR).demoted
    held = evaluate_cost_efficiency(eff(1.0, attempts=few, demoted=True), ON, MARGIN, now=HOUR)
    assert held.demoted


def test_evidence_that_aged_out_restores() -> None:
    """A demoted route whose window holds no billed attempt, or whose figures are a whole
    window old on the fake clock, is restored (it gets traffic again, like a half-open
    breaker); a fresh read at the same ratio keeps it demoted."""
    stale = eff(0.1, demoted=True, at=HOUR)
    assert evaluate_cost_efficiency(stale, ON, MARGIN, now=HOUR + 599).demoted
    assert not evaluate_cost_efficiency(stale, ON, MARGIN, now=HOUR + 600).demoted
    empty = eff(0.1, attempts=0, demoted=True)
    assert not evaluate_cost_efficiency(empty, ON, MARGIN, now=HOUR).demoted


def test_bad_margin_is_rejected() -> None:
    with pytest.raises(ValueError, match="hysteresis margin"):
        evaluate_cost_efficiency(eff(1.0), ON, 0.0, now=HOUR)


# --- the planner, fed by a ledger on a fake clock ----------------------------------------

PRIMARY = ROUTES[0]
ENABLED = POLICY.model_copy(update={"cost_efficiency": ON})


def _phase(ledger: CostLedger, start: float, answers: int, rejections: int) -> None:
    """``answers`` answered and ``rejections`` billed-but-rejected attempts from ``start``."""
    for i in range(answers):
        ledger.add(CallOutcome(route=PRIMARY, at=start + i, ok=True, tokens=TOKENS, cost_usd=PRICE))
    for i in range(rejections):
        ledger.add(
            CallOutcome(
                route=PRIMARY,
                at=start + 100 + i,
                ok=False,
                semantic_failure=True,
                error_class=ErrorClass.INVALID_OUTPUT,
                tokens=TOKENS,
                cost_usd=PRICE,
            )
        )


def _plan_at(ledger: CostLedger, now: float, policy: PolicyConfig = ENABLED):
    """What role_context and the planner do: judge, persist a change, plan."""
    figures = ledger.efficiency(now)
    verdict = evaluate_cost_efficiency(
        figures, policy.cost_efficiency, policy.hysteresis_margin, now=now
    )
    if verdict.demoted != ledger.demoted:
        ledger.demoted, ledger.since = verdict.demoted, now
        figures = ledger.efficiency(now)
    snap = HealthSnapshot(taken_at=now, routes={})
    snap.routes[PRIMARY] = snap.get(PRIMARY).model_copy(update={"cost": figures})
    return plan(policy.role("researcher"), policy, snap, facts(), now)


def _demoted(p) -> bool:
    skips = [s for s in p.skipped if s.route == PRIMARY and s.code is SkipReason.SLA_DEMOTED]
    # Moved behind every healthy route (in this roster past the budget: no attempt left).
    order = [a.route for a in p.attempts]
    return bool(skips) and PRIMARY not in order[:-1]


def test_planner_demotes_and_restores_with_hysteresis() -> None:
    """Rejections billed on the primary push it behind the healthy routes (SLA skip code, a
    reason naming cost efficiency); a partial recovery (59 % of baseline) is not enough;
    a full one (71 %) restores it. With the policy off it is never moved."""
    ledger = CostLedger(horizon_s=600.0)
    for i in range(40):  # the completed hour before: the baseline, 500k tokens per dollar
        ledger.add(
            CallOutcome(
                route=PRIMARY, at=HOUR - 3600 + 60 * i, ok=True, tokens=TOKENS, cost_usd=PRICE
            )
        )
    _phase(ledger, HOUR, answers=20, rejections=0)
    assert _plan_at(ledger, HOUR + 300).attempts[0].route == PRIMARY

    _phase(ledger, HOUR + 1000, answers=20, rejections=25)  # 44 % of baseline
    assert not _demoted(_plan_at(ledger, HOUR + 1300, POLICY))  # off: never moved
    demoting = _plan_at(ledger, HOUR + 1300)
    assert _demoted(demoting) and ledger.since == HOUR + 1300
    reason = next(s.reason for s in demoting.skipped if s.route == PRIMARY)
    assert "cost efficiency" in reason and "44%" in reason

    _phase(ledger, HOUR + 2000, answers=20, rejections=14)  # 59 %: between the lines
    assert _demoted(_plan_at(ledger, HOUR + 2300))
    assert ledger.since == HOUR + 1300  # the verdict did not change
    no_margin = evaluate_cost_efficiency(ledger.efficiency(HOUR + 2300), ON, 1.0, now=HOUR + 2300)
    assert not no_margin.demoted  # without hysteresis it would have flapped back

    _phase(ledger, HOUR + 3000, answers=20, rejections=8)  # 71 %: restored
    restored = _plan_at(ledger, HOUR + 3300)
    assert restored.attempts[0].route == PRIMARY and ledger.since == HOUR + 3300


@given(st.lists(st.floats(min_value=-600.0, max_value=200 * 3600.0), min_size=1, max_size=40))
def test_ledger_prunes_as_a_walk_on_every_write_would(offsets) -> None:
    """Minutes and hours behind the horizon are dropped only when it moves, yet after every
    write the ledger holds exactly what a walk over all its buckets would have left, calls
    arriving out of order included."""
    ledger = CostLedger(horizon_s=600.0)
    minutes: set[int] = set()
    hours: set[int] = set()
    for offset in offsets:
        at = HOUR + offset
        ledger.add(CallOutcome(route=PRIMARY, at=at, ok=True, tokens=TOKENS, cost_usd=PRICE))
        minutes = {m for m in {*minutes, minute_of(at)} if m >= minute_of(at - 600.0)}
        hours = {h for h in {*hours, hour_of(at)} if h >= hour_of(at) - HORIZON_HOURS}
        assert set(ledger.minutes) == minutes and set(ledger.hours) == hours
