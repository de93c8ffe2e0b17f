"""The run's role-context cache: fresh within its reuse age, dropped by a failure on a
route its policy names, keyed by role and roster override (pure, no server)."""

from __future__ import annotations

import pytest

from agent_failover.activities.models import RoleContext
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import HealthSnapshot
from agent_failover.resilience.options import CallOptions
from agent_failover.testing.roles import with_test_roles
from agent_failover.workflows.context_reuse import ContextCache, key_for

T0 = 1_000.0


def _ctx(policy: PolicyConfig, role: str = "plain", reuse_s: float | None = None) -> RoleContext:
    subset = policy.subset_for(role)
    r = subset.roles[role]
    if reuse_s is not None:
        r = r.model_copy(update={"context_reuse_s": reuse_s})
    return RoleContext(
        role=r,
        policy=subset,
        snapshot=HealthSnapshot(taken_at=T0),
        task_queue="q",
        policy_ref="ref",
    )


@pytest.fixture(scope="module")
def test_policy() -> PolicyConfig:
    return with_test_roles(load_policy(DEFAULT_POLICY_PATH))


def test_fresh_within_the_roles_reuse_age_only(test_policy: PolicyConfig) -> None:
    """A context is served while younger than the role's ``context_reuse_s``, not after."""
    cache, key, ctx = ContextCache(), key_for("plain", None), _ctx(test_policy, reuse_s=1.0)
    cache.keep(key, ctx, T0)
    assert cache.fresh(key, T0 + 0.5, None) is ctx
    assert cache.fresh(key, T0 + 1.0, None) is None
    assert cache.fresh(key, T0 - 1.0, None) is None  # never from the future


def test_the_calls_option_replaces_the_roles_age(test_policy: PolicyConfig) -> None:
    """``CallOptions.context_reuse_s`` wins over the role's; 0 turns reuse off."""
    cache, key = ContextCache(), key_for("plain", None)
    cache.keep(key, _ctx(test_policy, reuse_s=1.0), T0)
    assert cache.fresh(key, T0 + 5, 10.0) is not None
    assert cache.fresh(key, T0, 0.0) is None
    assert CallOptions(context_reuse_s=0).context_reuse_s == 0


def test_roles_and_roster_overrides_never_share(test_policy: PolicyConfig) -> None:
    """Another role, or the same role with a roster override, has its own entry."""
    cache = ContextCache()
    cache.keep(key_for("plain", None), _ctx(test_policy), T0)
    assert cache.fresh(key_for("hedged", None), T0, None) is None
    assert cache.fresh(key_for("plain", ["openai-us"]), T0, None) is None
    assert key_for("plain", []) == key_for("plain", None)


def test_a_failed_route_drops_the_contexts_naming_it(test_policy: PolicyConfig) -> None:
    """A failure on a route drops every context whose policy has that endpoint (both
    roles here), and only those."""
    cache = ContextCache()
    plain, hedged = _ctx(test_policy), _ctx(test_policy, "hedged")
    cache.keep(key_for("plain", None), plain, T0)
    cache.keep(key_for("hedged", None), hedged, T0)
    cache.forget_route("no-such-route")
    assert len(cache) == 2
    route = next(iter(plain.policy.endpoints))
    cache.forget_route(route)
    assert len(cache) == 0
    assert cache.fresh(key_for("plain", None), T0, None) is None
