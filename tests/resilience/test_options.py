"""Per-call options reshape the role's policy, and reject names the policy does not know."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_failover.resilience.config import ContentFilterMode, PolicyConfig, UnknownNameError
from agent_failover.resilience.options import (
    CallOptions,
    RosterOverride,
    apply_call_options,
    override_routes,
)


def test_no_options_is_the_role_itself(demo_policy: PolicyConfig) -> None:
    role = demo_policy.role("analyst")
    assert apply_call_options(role, demo_policy, None) is role
    assert override_routes(None) is None


def test_roster_override_replaces_live_tiers_keeps_cache_and_static(
    demo_policy: PolicyConfig,
) -> None:
    role = demo_policy.role("analyst")
    opts = CallOptions(roster=RosterOverride(tier0=["openai-us"], tier2=["cheap-mini"]))
    eff = apply_call_options(role, demo_policy, opts)
    assert eff.roster.tiers() == [(0, ["openai-us"]), (1, []), (2, ["cheap-mini"])]
    assert eff.roster.static == role.roster.static and eff.roster.cache == role.roster.cache
    assert override_routes(opts) == ["openai-us", "cheap-mini"]


def test_unknown_route_names_the_known_ones(demo_policy: PolicyConfig) -> None:
    opts = CallOptions(roster=RosterOverride(tier0=["gpt-9"]))
    with pytest.raises(UnknownNameError, match=r"gpt-9.*known: .*openai-us"):
        apply_call_options(demo_policy.role("analyst"), demo_policy, opts)


def test_duplicate_route_in_override_is_rejected() -> None:
    with pytest.raises(ValidationError, match="more than once"):
        RosterOverride(tier0=["openai-us"], tier1=["openai-us"])


def test_deadline_shrinks_every_budget_that_would_exceed_it(demo_policy: PolicyConfig) -> None:
    role = demo_policy.role("analyst")
    assert role.ttft_budget_ms > 500
    eff = apply_call_options(role, demo_policy, CallOptions(deadline_ms=500))
    assert eff.total_budget_ms == 500 and eff.ttft_budget_ms == 500
    assert eff.attempt_timeout <= 500


def test_content_filter_default_and_override(demo_policy: PolicyConfig) -> None:
    role = demo_policy.role("analyst")
    assert role.content_filter is ContentFilterMode.REFUSE
    eff = apply_call_options(role, demo_policy, CallOptions(content_filter="failover"))
    assert eff.content_filter is ContentFilterMode.FAILOVER


def test_options_reject_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="deadline"):
        CallOptions(deadline=5)  # type: ignore[call-arg]
