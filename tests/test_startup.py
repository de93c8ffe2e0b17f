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


USER_POLICY = (
    DEFAULT_POLICY_PATH.parents[1] / "examples" / "support_triage" / "config" / "policy.yaml"
)


def _registered(plugin: FailoverPlugin) -> tuple[set[str], set[str]]:
    """The workflow and activity names the plugin adds to a worker's configuration."""
    config = plugin.configure_worker(
        {"task_queue": "q", "client": None, "workflows": [], "activities": []}  # type: ignore[typeddict-item]
    )
    acts = {getattr(a, "__temporal_activity_definition").name for a in config["activities"]}
    return {w.__name__ for w in config["workflows"]}, acts


def test_a_users_plugin_registers_no_pipeline_unless_asked() -> None:
    """The library default is the library: the bundled pipeline only with
    ``include_pipeline=True``; the library's own activities (the saga's and the agent
    loop's tool calls, ``escalate``'s webhook) either way."""
    library = {"run_tool", "compensate", "notify_escalation", "call_model", "role_context"}
    workflows, acts = _registered(FailoverPlugin(DEFAULT_POLICY_PATH, stores="memory", codec=False))
    assert "AgentPipelineWorkflow" not in workflows and library <= acts
    assert "HealthMonitorWorkflow" in workflows
    asked = FailoverPlugin(DEFAULT_POLICY_PATH, stores="memory", codec=False, include_pipeline=True)
    workflows, acts_asked = _registered(asked)
    assert "AgentPipelineWorkflow" in workflows and library <= acts_asked


def test_a_policy_unfit_for_the_pipeline_is_refused_at_construction() -> None:
    """``include_pipeline=True`` with a policy lacking the pipeline's roles: one line naming
    the file and the missing roles, at construction; without it the policy is fine."""
    assert USER_POLICY.is_file()
    FailoverPlugin(USER_POLICY, stores="memory", codec=False)
    with pytest.raises(PolicyError) as caught:
        FailoverPlugin(USER_POLICY, stores="memory", codec=False, include_pipeline=True)
    msg = str(caught.value)
    assert "\n" not in msg and str(USER_POLICY.resolve()) in msg
    assert "roles.planner: missing" in msg and "include_pipeline" in msg
