"""The policy registry: versions by ref, the refs a decode missed, and a public reset."""

from __future__ import annotations

import pytest

from agent_failover.activities.policy_registry import (
    POLICY_REGISTRY,
    PolicyRegistry,
    PolicyVersionMissing,
    policy_body,
    policy_ref,
)
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig


@pytest.fixture(scope="module")
def policy() -> PolicyConfig:
    """The demo policy (nothing is called: no simulator needed)."""
    return load_policy(DEFAULT_POLICY_PATH, env={"SIM_URL": "http://sim.test"})


def test_a_registered_policy_is_found_by_its_ref(policy: PolicyConfig) -> None:
    """register then get, [] and ``in`` all find it; an unknown ref is simply absent."""
    reg = PolicyRegistry()
    sub = policy.checked_subset_for("analyst")
    ref = policy_ref(sub)
    reg.register(ref, sub)
    assert reg.get(ref) is sub and reg[ref] is sub and ref in reg
    assert reg.get("0" * 16) is None and "0" * 16 not in reg
    with pytest.raises(KeyError):
        reg["0" * 16]


def test_the_ref_is_a_content_hash_of_the_stored_body(policy: PolicyConfig) -> None:
    """The same subset always has the same 16-hex-digit ref; another subset another."""
    a, b = policy.checked_subset_for("analyst"), policy.checked_subset_for("planner")
    assert policy_ref(a) == policy_ref(a.model_copy(deep=True))
    assert len(policy_ref(a)) == 16 and policy_ref(a) != policy_ref(b)
    assert PolicyConfig.model_validate_json(policy_body(a)) == a


def test_the_first_registration_of_a_ref_wins(policy: PolicyConfig) -> None:
    """Content addressed: a ref names one policy, so a second registration changes nothing."""
    reg = PolicyRegistry()
    first, other = policy.checked_subset_for("analyst"), policy.checked_subset_for("planner")
    reg.register("r", first)
    reg.register("r", other)
    assert reg["r"] is first


def test_a_missed_lookup_is_remembered_until_registered(policy: PolicyConfig) -> None:
    """lookup of an unknown ref raises naming the ref, role and stores, and notes it
    missing (for the background fetch); registering it clears that."""
    reg = PolicyRegistry()
    reg.add_store("directory /srv/policies")
    reg.add_store("directory /srv/policies")  # noted once
    with pytest.raises(PolicyVersionMissing, match="directory /srv/policies") as err:
        reg.lookup("ab" * 8, "analyst")
    assert "'analyst'" in str(err.value) and "ab" * 8 in str(err.value)
    assert reg.missing == {"ab" * 8} and reg.stores == ["directory /srv/policies"]
    sub = policy.checked_subset_for("analyst")
    reg.register("ab" * 8, sub)
    assert reg.missing == set() and reg.lookup("ab" * 8, "analyst") is sub


def test_reset_forgets_everything_as_a_fresh_process(policy: PolicyConfig) -> None:
    """reset empties the policies, the missed refs and the stores."""
    reg = PolicyRegistry()
    reg.register("r", policy.checked_subset_for("analyst"))
    reg.add_store("memory")
    with pytest.raises(PolicyVersionMissing, match="memory"):
        reg.lookup("x", "analyst")
    reg.reset()
    assert "r" not in reg and reg.missing == set() and reg.stores == []
    with pytest.raises(PolicyVersionMissing, match="none configured in this process"):
        reg.lookup("r", "analyst")


def test_the_process_registry_starts_each_test_empty(policy: PolicyConfig) -> None:
    """The autouse fixture resets the process-wide registry around every test here."""
    assert POLICY_REGISTRY.stores == [] and POLICY_REGISTRY.missing == set()
    POLICY_REGISTRY.register("leaked", policy.checked_subset_for("analyst"))
