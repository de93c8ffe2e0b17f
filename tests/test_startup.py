"""What a plugin settles before its worker runs: the policy (never the demo by default),
and the one start-up line naming policy, version, store, queues and bulkheads."""

from __future__ import annotations

import pytest

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.plugin import FailoverPlugin
from agent_failover.resilience.config import PolicyError
from agent_failover.resilience.setup_errors import SetupError
from agent_failover.startup import policy_version, resolve_policy, startup_line


def test_no_policy_and_no_env_is_an_error_saying_how(monkeypatch: pytest.MonkeyPatch) -> None:
    """``FailoverPlugin()`` without ``FAILOVER_POLICY`` does not load the demo policy."""
    monkeypatch.delenv("FAILOVER_POLICY", raising=False)
    with pytest.raises(PolicyError) as caught:
        FailoverPlugin(stores="memory")
    msg = str(caught.value)
    assert isinstance(caught.value, SetupError) and "\n" not in msg
    assert "FAILOVER_POLICY" in msg and "failover dev" in msg and "FailoverPlugin(" in msg


def test_policy_from_env_and_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAILOVER_POLICY", str(DEFAULT_POLICY_PATH))
    policy, source = resolve_policy(None)
    assert source == str(DEFAULT_POLICY_PATH.resolve())
    assert set(policy.roles) == set(load_policy(DEFAULT_POLICY_PATH).roles)
    assert resolve_policy(policy)[1] == "a PolicyConfig object"


def test_version_is_the_content_hash() -> None:
    """Same content, same version; a changed field, another one."""
    a, b = load_policy(DEFAULT_POLICY_PATH), load_policy(DEFAULT_POLICY_PATH)
    assert policy_version(a) == policy_version(b) and len(policy_version(a)) == 16
    role = next(iter(b.roles))
    old = b.roles[role].total_budget_ms
    b.roles[role] = b.roles[role].model_copy(update={"total_budget_ms": old + 1})
    assert policy_version(a) != policy_version(b)


def test_startup_line_names_everything_an_operator_checks() -> None:
    policy = load_policy(DEFAULT_POLICY_PATH)
    line = startup_line(
        source="/srv/policy.yaml",
        policy=policy,
        store="redis://10.0.0.5:6379/0",
        task_queue="my-app",
        bulkheads={"core": ("my-app-llm-core", 16), "specialists": ("my-app-llm-specialists", 32)},
        dispatch="eager",
    )
    assert "\n" not in line
    for part in (
        "task queue my-app",
        f"policy /srv/policy.yaml (version {policy_version(policy)})",
        "store redis://10.0.0.5:6379/0",
        "core (my-app-llm-core, 16 slots), specialists (my-app-llm-specialists, 32 slots)",
    ):
        assert part in line
