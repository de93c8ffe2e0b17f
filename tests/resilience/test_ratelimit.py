"""A 429's decision: wait a short Retry-After out on the same route, else fail over now."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.config import RateLimitSettings
from agent_failover.resilience.ratelimit import (
    WaitVerdict,
    cooldown_s,
    same_route_wait_s,
    shared_cooldown_wait_ms,
)
from tests.resilience.helpers import PROPERTY

S = RateLimitSettings()  # max_wait_ms 2000
NOW = 1_000_000.0


def test_short_retry_after_is_waited_out_exactly() -> None:
    """A 1.2 s Retry-After with 20 s left: retry the same route after exactly 1.2 s."""
    w = same_route_wait_s(1.2, S, now=NOW, deadline=NOW + 20, min_attempt_ms=2000)
    assert w.wait and w.delay_s == 1.2


def test_long_retry_after_fails_over_at_once() -> None:
    """Anything above rate_limit.max_wait_ms fails over now."""
    w = same_route_wait_s(2.5, S, now=NOW, deadline=NOW + 60, min_attempt_ms=2000)
    assert not w.wait and w.verdict is WaitVerdict.TOO_LONG


def test_wait_never_runs_past_the_deadline() -> None:
    """The retry must still start with its TTFT budget before the deadline."""
    w = same_route_wait_s(1.5, S, now=NOW, deadline=NOW + 3.0, min_attempt_ms=2000)
    assert w.verdict is WaitVerdict.PAST_DEADLINE
    assert same_route_wait_s(1.0, S, now=NOW, deadline=NOW + 3.0, min_attempt_ms=2000).wait


def test_no_hint_and_no_retry_left_fail_over() -> None:
    """Without a Retry-After, or with the same-route retry spent, the call moves on."""
    assert (
        same_route_wait_s(None, S, now=NOW, deadline=None, min_attempt_ms=1).verdict
        is WaitVerdict.NO_HINT
    )
    spent = same_route_wait_s(0.5, S, now=NOW, deadline=None, min_attempt_ms=1, retry_left=False)
    assert spent.verdict is WaitVerdict.NO_RETRY_LEFT


def test_max_wait_zero_disables_waiting() -> None:
    """rate_limit.max_wait_ms = 0 restores "always fail over"."""
    off = RateLimitSettings(max_wait_ms=0)
    assert not same_route_wait_s(0.2, off, now=NOW, deadline=None, min_attempt_ms=1).wait


def test_cooldown_is_retry_after_else_the_default() -> None:
    """A 429 cools the route for Retry-After; without one, for default_cooldown_s."""
    assert cooldown_s(1.5, S) == 1.5
    assert cooldown_s(None, S) == S.default_cooldown_s
    assert cooldown_s(-3.0, S) == 0.0


@PROPERTY
@given(
    retry_after=st.floats(min_value=0, max_value=120),
    left=st.floats(min_value=0, max_value=120),
    ttft=st.floats(min_value=1, max_value=10_000),
)
def test_a_wait_fits_the_budget_and_the_cap(retry_after: float, left: float, ttft: float) -> None:
    """Whenever the verdict is WAIT: delay == Retry-After <= max wait, and delay + TTFT fits."""
    w = same_route_wait_s(retry_after, S, now=NOW, deadline=NOW + left, min_attempt_ms=ttft)
    if w.wait:
        assert w.delay_s == retry_after and retry_after * 1000 <= S.max_wait_ms
        assert NOW + retry_after + ttft / 1000 <= NOW + left + 1e-9
    else:
        assert w.delay_s is None


def test_settings_validate() -> None:
    """Negative waits and cool-downs are configuration errors."""
    with pytest.raises(ValueError):
        RateLimitSettings(max_wait_ms=-1)
    with pytest.raises(ValueError):
        RateLimitSettings(default_cooldown_s=0)


def test_a_shared_cool_down_is_waited_out_by_the_same_rule() -> None:
    """What is left of another request's short Retry-After is waited out when it fits the
    call; a long one, one past the call's end, or this call's own cool-down is not."""
    wait = shared_cooldown_wait_ms
    assert wait(NOW + 1.2, None, S, now=NOW, remaining_ms=20_000, ttft_budget_ms=2000) == (
        pytest.approx(1200)
    )
    assert wait(NOW + 2.5, None, S, now=NOW, remaining_ms=60_000, ttft_budget_ms=2000) is None
    assert wait(NOW + 1.2, None, S, now=NOW, remaining_ms=3000, ttft_budget_ms=2000) is None
    assert wait(NOW + 1.2, NOW + 1.2, S, now=NOW, remaining_ms=20_000, ttft_budget_ms=2000) is None
    assert wait(NOW - 1, None, S, now=NOW, remaining_ms=20_000, ttft_budget_ms=2000) is None
    assert wait(None, None, S, now=NOW, remaining_ms=20_000, ttft_budget_ms=2000) is None
