"""The health store's cost-efficiency contract, against the in-memory store and real Redis.

Useful tokens and billed spend per route, over the current window (the store's horizon)
and over the completed hours of the last 7 days, and the persisted verdict: both
implementations must count the same attempts and report the same sums.
"""

from __future__ import annotations

import pytest

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.errors import ErrorClass
from agent_failover.stores.health import HealthStore

ROUTE = "anthropic-us-east"
HOUR = 472_222 * 3600.0  # an hour boundary
SETTINGS = BreakerSettings(consecutive_failures=None, consecutive_timeouts=None)


def answered(at: float, tokens: int, cost_usd: float, **kw: object) -> CallOutcome:
    """An answered call on ROUTE billed ``cost_usd`` for ``tokens``."""
    return CallOutcome(
        route=kw.pop("route", ROUTE), at=at, ok=True, tokens=tokens, cost_usd=cost_usd, **kw
    )


def rejected(at: float, tokens: int, cost_usd: float) -> CallOutcome:
    """A whole body the provider billed that failed validation (a semantic failure)."""
    return CallOutcome(
        route=ROUTE,
        at=at,
        ok=False,
        error_class=ErrorClass.INVALID_OUTPUT,
        semantic_failure=True,
        tokens=tokens,
        cost_usd=cost_usd,
    )


async def test_billed_rejections_lower_tokens_per_dollar(health_store: HealthStore) -> None:
    """Answers count tokens and spend; a rejected billed body counts its spend only, so the
    current window holds half the baseline's useful tokens per dollar."""
    for i in range(40):  # the completed hour before: 40 answers of 1000 tokens at $0.002
        await health_store.record(answered(HOUR - 3600 + 60 * i, 1000, 0.002), SETTINGS)
    now = HOUR + 600
    for i in range(10):  # now: 10 answers and 10 billed rejections, same price
        await health_store.record(answered(now - 300 + 20 * i, 1000, 0.002), SETTINGS)
        await health_store.record(rejected(now - 290 + 20 * i, 1000, 0.002), SETTINGS)
    eff = await health_store.cost_efficiency(ROUTE, now=now)
    assert (eff.baseline_attempts, eff.baseline_tokens) == (40, 40 * 1000)
    assert eff.baseline_spend_usd == pytest.approx(40 * 0.002)
    assert (eff.current_attempts, eff.current_tokens) == (20, 10 * 1000)
    assert eff.current_spend_usd == pytest.approx(20 * 0.002)
    assert eff.baseline_tokens_per_usd == pytest.approx(1000 / 0.002)
    assert eff.share == pytest.approx(0.5)


async def test_probes_and_unbilled_failures_count_nothing(health_store: HealthStore) -> None:
    """A probe (even a priced one) and a failure with no body billed add no attempt."""
    now = HOUR + 120
    await health_store.record(answered(now - 30, 50, 0.0001, probe=True), SETTINGS)
    failed = CallOutcome(route=ROUTE, at=now - 20, ok=False, error_class=ErrorClass.SERVER_ERROR)
    await health_store.record(failed, SETTINGS)
    await health_store.record(answered(now - 10, 500, 0.0), SETTINGS)  # a free route
    eff = await health_store.cost_efficiency(ROUTE, now=now)
    assert eff.current_attempts == 0 and eff.current_tokens_per_usd is None
    unseen = await health_store.cost_efficiency("never-called", now=now)
    assert unseen.current_attempts == 0 and unseen.baseline_attempts == 0


async def test_baseline_leaves_out_the_hour_in_progress(health_store: HealthStore) -> None:
    """Attempts of the current hour are in the current window, not yet in the baseline;
    once the hour is over they are, and they leave the current window."""
    await health_store.record(answered(HOUR + 100, 800, 0.004), SETTINGS)
    during = await health_store.cost_efficiency(ROUTE, now=HOUR + 200)
    assert (during.current_attempts, during.baseline_attempts) == (1, 0)
    after = await health_store.cost_efficiency(ROUTE, now=HOUR + 3600 + 200)
    assert (after.current_attempts, after.baseline_attempts) == (0, 1)
    assert after.baseline_tokens_per_usd == pytest.approx(800 / 0.004)


async def test_cost_verdict_is_persisted_with_its_time(health_store: HealthStore) -> None:
    """A set demotion is read back with when it changed; clearing it keeps the time."""
    await health_store.set_cost_demoted(ROUTE, True, at=HOUR + 5)
    eff = await health_store.cost_efficiency(ROUTE, now=HOUR + 10)
    assert eff.demoted and eff.since == HOUR + 5
    await health_store.set_cost_demoted(ROUTE, False, at=HOUR + 50)
    eff = await health_store.cost_efficiency(ROUTE, now=HOUR + 60)
    assert not eff.demoted and eff.since == HOUR + 50
    other = await health_store.cost_efficiency("other", now=HOUR + 60)
    assert not other.demoted and other.since is None
