"""Policy loading: the demo and example policies load; every kind of error names its field."""

from __future__ import annotations

import copy
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from agent_failover.config.loader import check_policy_file, load_policy
from agent_failover.resilience.config import (
    DEFAULT_ERROR_RATE_THRESHOLD,
    DEFAULT_HYSTERESIS_MARGIN,
    DEFAULT_PROBE_INTERVAL_S,
    BreakerOverride,
    BreakerSettings,
    PolicyConfig,
    PolicyError,
    parse_policy,
)
from agent_failover.resilience.endpoint import (
    AuthMethod,
    Capabilities,
    Cloud,
    EndpointConfig,
    Prices,
)
from agent_failover.resilience.quality import ScorerSpec
from tests.resilience.conftest import DEMO_POLICY, EXAMPLE_POLICY

SIM_ENDPOINTS = {
    "anthropic-us-east", "anthropic-eu-west", "openai-us", "cheap-mini", "gemini-flash",
    "bedrock-us-west-2", "vertex-europe-west1",
}  # fmt: skip
ROLES = {"planner", "researcher", "analyst", "critic", "synthesis"}


@pytest.fixture
def raw() -> dict[str, Any]:
    """The demo policy as plain YAML data, to be broken by each test."""
    return yaml.safe_load(DEMO_POLICY.read_text())


def errors_of(data: dict[str, Any], env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    with pytest.raises(PolicyError) as info:
        parse_policy(data, env=env or {})
    return info.value.errors


def test_demo_policy_loads(demo_policy: PolicyConfig) -> None:
    """The simulator policy is valid, has the seven endpoints and five roles, no warnings;
    the same Claude model on Bedrock and Vertex stands by first in tier 1."""
    assert set(demo_policy.endpoints) == SIM_ENDPOINTS
    assert set(demo_policy.roles) == ROLES
    assert demo_policy.warnings == []
    assert demo_policy.endpoint("anthropic-us-east").base() == (
        "http://127.0.0.1:8400/anthropic-us-east"
    )
    assert demo_policy.endpoint("openai-us").base().endswith("/openai-us/v1")
    assert demo_policy.endpoint("gemini-flash").base().endswith("/gemini-flash")
    assert demo_policy.routes_for("critic") == [
        "anthropic-us-east", "bedrock-us-west-2", "vertex-europe-west1", "anthropic-eu-west",
        "openai-us", "cheap-mini", "gemini-flash",
    ]  # fmt: skip
    primary = demo_policy.endpoint("anthropic-us-east")
    for name in ("bedrock-us-west-2", "vertex-europe-west1"):
        standby = demo_policy.endpoint(name)
        assert standby.family == primary.family and standby.model != primary.model
        assert (standby.organisation, standby.region) != (primary.organisation, primary.region)


def test_sim_url_interpolation() -> None:
    """${SIM_URL:-default} takes the environment value when set."""
    cfg = load_policy(DEMO_POLICY, env={"SIM_URL": "http://127.0.0.1:9999"})
    assert cfg.endpoint("cheap-mini").base() == "http://127.0.0.1:9999/cheap-mini/v1"


def test_example_policy_loads() -> None:
    """The real-provider example is valid, multi-cloud, and names key variables, not keys;
    cloud routes without a key authenticate through their platform's credential chain."""
    cfg = load_policy(EXAMPLE_POLICY, env={"GOOGLE_CLOUD_PROJECT": "acme-prod"})
    assert set(cfg.roles) == ROLES
    assert {ep.cloud for ep in cfg.endpoints.values()} == {None, *Cloud}
    for ep in cfg.endpoints.values():
        if ep.auth is AuthMethod.API_KEY:
            assert ep.api_key_env and ep.api_key_env.endswith("_API_KEY")
        else:
            assert ep.api_key_env is None
            assert ep.auth in (AuthMethod.AWS_SIGV4, AuthMethod.GOOGLE_OAUTH, AuthMethod.ENTRA_ID)


def test_defaults_are_the_seeds() -> None:
    """Unset settings take the seeds' numbers: seed 000's 10 s probe interval, seed 003's
    breakers (15 % errors over 30 s, 10 % semantic failures over 60 s, window p95 over 3x
    the 7-day baseline p95), with a minimum of 10 calls per window."""
    b = BreakerSettings()
    assert b.p95_baseline_factor == 3.0
    assert b.error_rate_threshold == DEFAULT_ERROR_RATE_THRESHOLD == 0.15
    assert (b.error_window_s, b.min_calls) == (30, 10)
    assert (b.open_duration_s, b.open_duration_multiplier, b.max_open_duration_s) == (30, 2, 300)
    assert (b.half_open_max_trials, b.close_after_consecutive_successes) == (3, 3)
    assert (b.semantic_failure_threshold, b.semantic_window_s) == (0.10, 60)
    assert (b.slow_call_baseline_factor, b.slow_call_rate_threshold) == (3.0, 0.5)
    assert DEFAULT_PROBE_INTERVAL_S == 10 and DEFAULT_HYSTERESIS_MARGIN == 0.8


def test_breaker_override_merges(demo_policy: PolicyConfig) -> None:
    """breaker_for() applies the endpoint's override over the shared settings."""
    assert demo_policy.breaker_for("cheap-mini").min_calls == 5
    assert demo_policy.breaker_for("cheap-mini").error_rate_threshold == 0.15
    assert demo_policy.breaker_for("openai-us") == demo_policy.breaker


def test_unknown_endpoint_in_roster(raw: dict[str, Any]) -> None:
    """A roster naming an unknown endpoint reports roles.<role>.roster.tierN[i]."""
    raw["roles"]["critic"]["roster"]["tier1"][0] = "gpt-x"
    [msg] = [m for p, m in errors_of(raw) if p == "roles.critic.roster.tier1[0]"]
    assert msg.startswith("unknown endpoint 'gpt-x'; known endpoints: anthropic-eu-west, ")


def test_out_of_range_threshold(raw: dict[str, Any]) -> None:
    """A threshold outside its range names the field."""
    raw["breaker"]["error_rate_threshold"] = 1.5
    raw["probes"]["interval_s"] = 0.5
    paths = {p for p, _ in errors_of(raw)}
    assert {"breaker.error_rate_threshold", "probes.interval_s"} <= paths


def test_weights_must_sum_to_one(raw: dict[str, Any]) -> None:
    """Scoring weights that do not sum to 1 are rejected at scoring."""
    raw["scoring"] = {"health": 0.5, "latency": 0.3, "cost": 0.3}
    [(path, msg)] = errors_of(raw)
    assert path == "scoring" and "sum to 1" in msg


def test_static_fallback_must_match_schema(raw: dict[str, Any]) -> None:
    """A static fallback violating the role's output schema names the offending field."""
    raw["roles"]["critic"]["roster"]["static"]["data"]["verdict"] = "maybe"
    [(path, msg)] = errors_of(raw)
    assert path == "roles.critic.roster.static.data.verdict"
    assert "violates output_schema" in msg


def test_static_fallback_data_required_with_schema(raw: dict[str, Any]) -> None:
    """A structured role's static fallback must carry data."""
    del raw["roles"]["planner"]["roster"]["static"]["data"]
    expected = (
        "roles.planner.roster.static.data",
        "required because the role has an output_schema",
    )
    assert expected in errors_of(raw)


def test_bad_yaml_reports_line(tmp_path: Path) -> None:
    """Malformed YAML fails with the file, line and column."""
    bad = tmp_path / "policy.yaml"
    bad.write_text("endpoints:\n  a: [1, 2\nroles: {}\n")
    with pytest.raises(PolicyError) as info:
        load_policy(bad, env={})
    [(where, msg)] = info.value.errors
    assert where.startswith(f"{bad}:") and "invalid YAML" in msg


def test_missing_file_is_a_policy_error(tmp_path: Path) -> None:
    """A missing file is reported, not raised as OSError."""
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "nope.yaml", env={})


def test_unknown_key_and_type_errors(raw: dict[str, Any]) -> None:
    """Unknown keys and wrong types are reported with their paths, all at once."""
    raw["roles"]["analyst"]["hedging"]["delay"] = 100
    raw["endpoints"]["openai-us"]["context_window"] = "big"
    paths = {p for p, _ in errors_of(raw)}
    assert {"roles.analyst.hedging.delay", "endpoints.openai-us.context_window"} <= paths


def test_unset_variable_without_default(raw: dict[str, Any]) -> None:
    """${VAR} with no default and no value names the field that used it."""
    raw["endpoints"]["openai-us"]["api_key_env"] = "${KEY_NAME}"
    expected = ("endpoints.openai-us.api_key_env", "environment variable 'KEY_NAME' is not set")
    assert expected in errors_of(raw)


def test_budget_consistency(raw: dict[str, Any]) -> None:
    """A TTFT budget larger than the total budget is rejected on the role."""
    raw["roles"]["planner"]["ttft_budget_ms"] = 30_000
    [(path, msg)] = errors_of(raw)
    assert path == "roles.planner" and "ttft_budget_ms" in msg


def test_override_for_unknown_endpoint(raw: dict[str, Any]) -> None:
    """breaker_overrides keys must be endpoints; merged overrides are re-validated."""
    raw["breaker_overrides"]["nope"] = {"min_calls": 3}
    raw["breaker_overrides"]["cheap-mini"] = {"max_open_duration_s": 1}
    paths = {p for p, _ in errors_of(raw)}
    assert {"breaker_overrides.nope", "breaker_overrides.cheap-mini"} <= paths


def test_standby_sharing_org_and_region_warns(raw: dict[str, Any]) -> None:
    """A tier-1 standby in the primary's organisation and region produces a warning."""
    data = copy.deepcopy(raw)
    data["endpoints"]["anthropic-eu-west"]["region"] = "us-east"
    cfg = parse_policy(data, env={})
    # anthropic-eu-west is third in tier 1, behind the Bedrock and Vertex standbys
    assert any("roles.planner.roster.tier1[2]" in w and "us-east" in w for w in cfg.warnings)


def test_role_lookup_names_known_roles(demo_policy: PolicyConfig) -> None:
    """role()/endpoint() on an unknown name list the known ones and are KeyErrors too."""
    with pytest.raises(PolicyError, match="known: analyst, critic, planner"):
        demo_policy.role("reasoning")
    with pytest.raises(KeyError) as info:
        demo_policy.endpoint("gpt-x")
    assert str(info.value).startswith("endpoints.gpt-x: unknown endpoint (known: anthropic-eu-west")


def _models_under(model: type[BaseModel]) -> set[type[BaseModel]]:
    """``model`` and every pydantic model its fields can hold, found by walking the
    annotations (unions, lists and dict values included)."""
    found: set[type[BaseModel]] = set()
    pending: list[Any] = [model]
    while pending:
        item = pending.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            if item not in found:
                found.add(item)
                pending += [f.annotation for f in item.model_fields.values()]
        else:
            pending += typing.get_args(item)
    return found


def test_every_policy_field_is_described() -> None:
    """Every field of every model reachable from PolicyConfig carries a description, which
    the policy reference is generated from."""
    models = _models_under(PolicyConfig)
    assert {EndpointConfig, Prices, Capabilities, BreakerOverride, ScorerSpec} <= models
    missing = [
        f"{m.__name__}.{name}"
        for m in models
        for name, field in m.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert sorted(missing) == []


def test_policy_error_prints_one_line_per_problem() -> None:
    """str(PolicyError) is one 'path: message' line per problem."""
    err = PolicyError([("roles.a.roster.tier1[0]", "unknown endpoint 'gpt-x'"), ("scoring", "bad")])
    assert str(err) == "roles.a.roster.tier1[0]: unknown endpoint 'gpt-x'\nscoring: bad"


def test_check_policy_file(tmp_path: Path, raw: dict[str, Any]) -> None:
    """check_policy_file returns ok + a summary, or not ok + one error line per problem."""
    ok, lines = check_policy_file(DEMO_POLICY, env={})
    assert ok and "is valid" in lines[0] and any("role critic" in line for line in lines)
    raw["scoring"]["cost"] = 0.9
    raw["roles"]["critic"]["roster"]["tier0"] = ["nope"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    ok, lines = check_policy_file(bad, env={})
    assert not ok
    expected = "error: roles.critic.roster.tier0[0]: unknown endpoint 'nope'"
    assert any(expected in line for line in lines)


def _endpoint_errors(**fields: Any) -> list[tuple[str, str]]:
    base: dict[str, Any] = {"name": "x", "model": "m"}
    return errors_of(
        {
            "endpoints": {"x": {**base, **fields}},
            "roles": {"r": {"roster": {"tier0": ["x"], "static": {"content": "c"}}}},
        }
    )


@pytest.mark.parametrize(
    ("fields", "path", "words"),
    [
        ({"provider": "openai", "cloud": "azure", "base_url": "https://r.openai.azure.com"},
         "endpoints.x.deployment", "required when cloud is azure"),
        ({"provider": "anthropic", "cloud": "gcp", "region": "europe-west1"},
         "endpoints.x.project", "required when cloud is gcp"),
        ({"provider": "bedrock", "region": "global"}, "endpoints.x.region", "not an AWS region"),
        ({"provider": "gemini", "cloud": "gcp", "region": "mars", "project": "p"},
         "endpoints.x.region", "not a Vertex AI location"),
        ({"provider": "openai", "cloud": "aws", "region": "us-east-1"},
         "endpoints.x.cloud", "serves provider bedrock, not openai"),
        ({"provider": "bedrock", "region": "us-east-1", "auth": "google_oauth"},
         "endpoints.x.auth", "not available for cloud aws"),
        ({"provider": "anthropic", "base_url": "https://a", "auth": "api_key"},
         "endpoints.x.auth", "needs api_key_env"),
        ({"provider": "anthropic"}, "endpoints.x.base_url", "required"),
        ({"provider": "anthropic", "base_url": "https://a", "deployment": "d"},
         "endpoints.x.deployment", "only used with cloud: azure"),
        ({"provider": "openai", "base_url": "https://a", "headers": {"Authorization": "k"}},
         "endpoints.x.headers", "headers_from_env"),
        ({"provider": "openai", "base_url": "https://a", "headers_from_env": {"x-k": "1bad"}},
         "endpoints.x.headers_from_env", "not an environment variable name"),
        ({"provider": "openai", "cloud": "azure", "base_url": "https://r", "deployment": "d",
          "query": {"api-version": "1"}}, "endpoints.x.query", "set api_version"),
        ({"provider": "openai", "base_url": "https://a", "api_key_env": "sk-live-123"},
         "endpoints.x.api_key_env", "not an environment variable name"),
    ],
)  # fmt: skip
def test_cloud_endpoint_errors_name_their_field(fields, path, words) -> None:
    """Every cloud rule fails at the field it is about, with the reason."""
    errors = _endpoint_errors(**fields)
    assert any(p == path and words in m for p, m in errors), errors


def test_cloud_defaults_are_derived() -> None:
    """Bedrock implies aws and SigV4; gcp implies OAuth; Azure without a key uses Entra ID;
    base URLs follow the region; a key variable means api_key auth."""
    bedrock = EndpointConfig(name="b", provider="bedrock", region="eu-central-1", model="m")
    assert (bedrock.cloud, bedrock.auth) == (Cloud.AWS, AuthMethod.AWS_SIGV4)
    assert bedrock.base() == "https://bedrock-runtime.eu-central-1.amazonaws.com"
    assert bedrock.organisation == "aws" and bedrock.family == "m"
    vertex = EndpointConfig(
        name="v", provider="anthropic", cloud="gcp", region="us-east5", project="p", model="m"
    )
    assert vertex.auth is AuthMethod.GOOGLE_OAUTH
    assert vertex.base() == "https://us-east5-aiplatform.googleapis.com"
    azure = EndpointConfig(
        name="a", provider="openai", cloud="azure", base_url="https://r.openai.azure.com",
        deployment="d", model="gpt-4.1",
    )  # fmt: skip
    assert azure.auth is AuthMethod.ENTRA_ID and azure.organisation == "microsoft"
    keyed = azure.model_copy(update={"api_key_env": "AZURE_OPENAI_API_KEY", "auth": None})
    assert EndpointConfig.model_validate(keyed.model_dump()).auth is AuthMethod.API_KEY


def test_trial_line_defaults_to_the_ttft_budget(demo_policy: PolicyConfig) -> None:
    """trial_latency_ms null resolves to the role's TTFT budget (real-call trial) or the
    smallest budget of the roles using the route (probe); a configured line wins."""
    cfg = demo_policy.model_copy(
        update={"breaker": demo_policy.breaker.model_copy(update={"trial_latency_ms": None})}
    )
    assert cfg.breaker_for("openai-us").trial_latency_ms is None
    assert cfg.trial_settings("openai-us", "researcher").trial_latency_ms == 2000
    assert cfg.trial_settings("openai-us").trial_latency_ms == min(
        r.ttft_budget_ms for r in cfg.roles.values()
    )
    assert demo_policy.trial_settings("openai-us", "planner").trial_latency_ms == 2000


def test_context_window_is_optional_but_validated(raw: dict[str, Any]) -> None:
    """An endpoint may leave context_window out (unknown, not 128k); a set one is checked."""
    del raw["endpoints"]["openai-us"]["context_window"]
    assert parse_policy(raw, env={}).endpoint("openai-us").context_window is None
    raw["endpoints"]["openai-us"]["context_window"] = 100
    paths = {p for p, _ in errors_of(raw)}
    assert "endpoints.openai-us.context_window" in paths


def test_new_fields_validate_with_paths(raw: dict[str, Any]) -> None:
    """rate_limit, half_open_call_fraction and sla.restore_after are range-checked."""
    raw["rate_limit"] = {"max_wait_ms": -1}
    raw["breaker"]["half_open_call_fraction"] = 1.5
    raw["roles"]["critic"]["sla"]["restore_after"] = 0
    paths = {p for p, _ in errors_of(raw)}
    assert {
        "rate_limit.max_wait_ms",
        "breaker.half_open_call_fraction",
        "roles.critic.sla.restore_after",
    } <= paths


def test_static_fallback_may_never_approve(raw: dict[str, Any]) -> None:
    """An approving static verdict (data or JSON content) is rejected at load, by path."""
    static = raw["roles"]["critic"]["roster"]["static"]
    static["data"]["verdict"] = "approve"
    static["content"] = '{"verdict": "Approved", "reasons": []}'
    errors = dict(errors_of(raw))
    assert "never approve" in errors["roles.critic.roster.static.data.verdict"]
    assert "never approve" in errors["roles.critic.roster.static.content"]


def test_shipped_policies_have_non_approving_critics() -> None:
    """The demo and example critics fall back to a non-approving verdict."""
    for path in (DEMO_POLICY, EXAMPLE_POLICY):
        cfg = load_policy(path, env={"ANTHROPIC_API_KEY": "x"})
        data = cfg.role("critic").roster.static.data
        assert isinstance(data, dict) and data["verdict"] == "revise"


def test_policies_already_in_history_still_decode(demo_policy: PolicyConfig) -> None:
    """A policy carried by a running workflow (an old approving static critic) still
    decodes: load-time rules must not make in-flight workflows undecodable."""
    critic = demo_policy.role("critic")
    old_static = critic.roster.static.model_copy(
        update={"data": {"verdict": "approve", "reasons": []}}
    )
    old = demo_policy.model_copy(
        update={
            "roles": {
                "critic": critic.model_copy(
                    update={"roster": critic.roster.model_copy(update={"static": old_static})}
                )
            }
        }
    ).subset_for("critic")
    again = PolicyConfig.model_validate_json(old.model_dump_json())
    assert again.role("critic").roster.static.data["verdict"] == "approve"


def test_reply_size_and_confidence_fields_are_range_checked(raw: dict[str, Any]) -> None:
    """max_reply_bytes stays under what one payload can carry; min_confidence is 0..1."""
    raw["roles"]["analyst"]["max_reply_bytes"] = 4 * 1024 * 1024
    raw["roles"]["planner"]["min_confidence"] = 1.5
    paths = {p for p, _ in errors_of(raw)}
    assert {"roles.analyst.max_reply_bytes", "roles.planner.min_confidence"} <= paths


def test_override_for_an_endpoint_outside_a_roster_is_valid_everywhere(
    tmp_path: Path, raw: dict[str, Any]
) -> None:
    """A role whose roster leaves out an endpoint with a breaker override (the policy that
    once hung every pipeline) is valid: config check accepts it and every role's subset,
    as workflows decode it, is valid too (checked at load, so the two agree)."""
    raw["roles"]["solo"] = {
        "roster": {"tier0": ["openai-us"], "static": {"content": "unavailable"}},
    }
    assert "cheap-mini" in raw["breaker_overrides"]
    path = tmp_path / "solo.yaml"
    path.write_text(yaml.safe_dump(raw))
    ok, lines = check_policy_file(path, env={})
    assert ok, lines
    cfg = load_policy(path, env={})
    subset = cfg.checked_subset_for("solo")
    assert set(subset.endpoints) == {"openai-us"} and subset.breaker_overrides == {}


def test_subset_problems_are_reported_with_the_role(demo_policy: PolicyConfig) -> None:
    """Whatever would make a role's subset undecodable in a workflow is a PolicyError that
    names the role (the role-context activity turns it into a non-retryable policy_error)."""
    renamed = demo_policy.endpoint("openai-us").model_copy(update={"name": "other"})
    bad = demo_policy.model_copy(
        update={"endpoints": {**demo_policy.endpoints, "openai-us": renamed}}
    )
    with pytest.raises(PolicyError) as info:
        bad.checked_subset_for("analyst")
    assert all(path.startswith("roles.analyst") for path, _ in info.value.errors)


def test_context_window_is_bounded(raw: dict[str, Any]) -> None:
    """A context window of 10^30 tokens is a typo, named by its field (before: accepted)."""
    raw["endpoints"]["openai-us"]["context_window"] = 10**30
    paths = [p for p, _ in errors_of(raw, env={"SIM_URL": "http://sim.test"})]
    assert "endpoints.openai-us.context_window" in paths


def test_hedging_on_a_stateful_role_warns(raw: dict[str, Any]) -> None:
    """Hedging asked for on a role that is not stateless is off for it, and the policy
    says so in its warnings (before: dropped silently)."""
    raw["roles"]["critic"]["stateless"] = False
    raw["roles"]["critic"]["hedging"] = {"enabled": True}
    cfg = parse_policy(raw, env={"SIM_URL": "http://sim.test"})
    assert [w for w in cfg.warnings if w.startswith("roles.critic.hedging: ")]
    shipped = parse_policy(yaml.safe_load(DEMO_POLICY.read_text()), env={"SIM_URL": "http://s"})
    assert not [w for w in shipped.warnings if "hedging" in w]
