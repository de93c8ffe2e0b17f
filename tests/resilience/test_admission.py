"""The admission a recent breaker read answers (resilience/admission.py: admit_from_read)."""

from __future__ import annotations

import pytest

from agent_failover.resilience.admission import admit_from_read
from agent_failover.resilience.breaker import Breaker
from agent_failover.resilience.contracts import BreakerState

NOW = 1_700_000_000.0


@pytest.mark.parametrize("state", [BreakerState.CLOSED, BreakerState.FORCED_CLOSED])
def test_a_fresh_closed_read_admits(state: BreakerState) -> None:
    admission = admit_from_read(Breaker(route="r", state=state), NOW, 0.4, 1.0)
    assert admission is not None and admission.permitted and not admission.trial
    assert admission.state is state and admission.lease is None


@pytest.mark.parametrize(
    "state", [BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.FORCED_OPEN]
)
def test_any_other_state_asks_the_store(state: BreakerState) -> None:
    assert admit_from_read(Breaker(route="r", state=state), NOW, 0.0, 1.0) is None


@pytest.mark.parametrize("age", [1.01, -0.5])
def test_an_old_read_or_a_clock_gone_back_asks_the_store(age: float) -> None:
    assert admit_from_read(Breaker(route="r"), NOW, age, 1.0) is None


def test_a_route_in_a_cool_down_asks_the_store() -> None:
    cooling = Breaker(route="r", cooldown_until=NOW + 5)
    assert admit_from_read(cooling, NOW, 0.1, 1.0) is None
    assert admit_from_read(cooling, NOW + 5, 0.1, 1.0) is not None


def test_zero_max_age_always_asks_the_store_but_for_a_read_this_instant() -> None:
    assert admit_from_read(Breaker(route="r"), NOW, 0.001, 0.0) is None
