"""Prompt registry: which variant a route gets, the fallback note, and the structured path."""

from __future__ import annotations

import pytest

from agent_failover.resilience.config import PolicyConfig, PolicyError
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.prompts import (
    DEFAULT_VARIANT,
    SCHEMA_INSTRUCTION,
    StructuredPath,
    apply_prompt,
    choose_prompt,
    structured_path,
)

SCHEMA = {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}


def _with_prompts(policy: PolicyConfig, role: str, prompts: dict) -> PolicyConfig:
    data = policy.model_dump(mode="json", exclude={"warnings"})
    data["roles"][role]["prompts"] = prompts
    return PolicyConfig.model_validate(data)


def test_model_variant_beats_provider_and_default(demo_policy: PolicyConfig) -> None:
    """The route's model variant wins over its provider's; other routes get the default."""
    policy = _with_prompts(
        demo_policy,
        "analyst",
        {
            "models": {"gpt-4.1": {"system_prompt": "GPT prompt"}},
            "providers": {"openai": {"system_prompt": "OpenAI prompt"}},
        },
    )
    role = policy.role("analyst")
    gpt = choose_prompt(role, policy.endpoint("openai-us"))
    assert (gpt.variant, gpt.system, gpt.note) == ("model:gpt-4.1", "GPT prompt", None)
    primary = choose_prompt(role, policy.endpoint("anthropic-us-east"))
    assert primary.variant == DEFAULT_VARIANT and primary.system == role.system_prompt


def test_provider_variant_when_no_model_variant(demo_policy: PolicyConfig) -> None:
    """cheap-mini speaks the OpenAI wire at provider mistral: keyed by either name."""
    policy = _with_prompts(
        demo_policy, "analyst", {"providers": {"mistral": {"system_prompt": "Mistral"}}}
    )
    got = choose_prompt(policy.role("analyst"), policy.endpoint("cheap-mini"))
    assert (got.variant, got.system) == ("provider:mistral", "Mistral")


def test_missing_variant_falls_back_with_note(demo_policy: PolicyConfig) -> None:
    """Variants defined, none for this model or provider: the default, and a note naming it."""
    policy = _with_prompts(
        demo_policy, "analyst", {"models": {"gpt-4.1": {"system_prompt": "GPT prompt"}}}
    )
    role = policy.role("analyst")
    got = choose_prompt(role, policy.endpoint("gemini-flash"))
    assert got.variant == DEFAULT_VARIANT and got.system == role.system_prompt
    assert got.note is not None and "gemini-2.5-flash" in got.note and "default" in got.note


def test_no_variants_no_note(demo_policy: PolicyConfig) -> None:
    role = demo_policy.role("analyst")
    assert choose_prompt(role, demo_policy.endpoint("gemini-flash")).note is None


def test_variant_without_text_keeps_default_and_adds_few_shot(demo_policy: PolicyConfig) -> None:
    """A variant with only a few-shot block keeps the role's text and appends the examples."""
    shot = {"user": "Task: X", "assistant": '{"a": "b"}'}
    policy = _with_prompts(demo_policy, "analyst", {"models": {"gpt-4.1": {"few_shot": [shot]}}})
    role = policy.role("analyst")
    choice = choose_prompt(role, policy.endpoint("openai-us"))
    req = apply_prompt(ChatRequest(messages=[Message(role="user", content="q")]), choice, None)
    assert req.system is not None and role.system_prompt is not None
    assert req.system.startswith(role.system_prompt)
    assert "Input: Task: X" in req.system and 'Answer: {"a": "b"}' in req.system


def test_demo_planner_has_real_variants(demo_policy: PolicyConfig) -> None:
    role = demo_policy.role("planner")
    mini = choose_prompt(role, demo_policy.endpoint("cheap-mini"))
    assert mini.variant == "model:mistral-small-latest" and mini.few_shot
    assert mini.system != role.system_prompt


def test_unknown_variant_key_is_a_clear_error(demo_policy: PolicyConfig) -> None:
    """A variant for a model none of the role's routes serve is a typo, named by path."""
    with pytest.raises(PolicyError) as err:
        _with_prompts(demo_policy, "analyst", {"models": {"gpt-4.2": {"system_prompt": "x"}}})
    assert "roles.analyst.prompts.models.gpt-4.2" in str(err.value)


def test_structured_path_follows_declared_capability(demo_policy: PolicyConfig) -> None:
    ep = demo_policy.endpoint("openai-us")
    no_schema = ep.model_copy(
        update={"capabilities": ep.capabilities.model_copy(update={"structured_output": False})}
    )
    assert structured_path(ep, SCHEMA) is StructuredPath.NATIVE
    assert structured_path(no_schema, SCHEMA) is StructuredPath.PROMPT
    assert structured_path(no_schema, None) is None


def test_prompt_path_moves_schema_into_system() -> None:
    """Prompt-and-validate: no schema on the wire, the schema at the end of the system text."""
    req = ChatRequest(system="Be brief.", messages=[Message(role="user", content="q")])
    req = req.model_copy(update={"json_schema": SCHEMA})
    native = apply_prompt(req, None, StructuredPath.NATIVE)
    assert native.json_schema == SCHEMA and native.system == "Be brief."
    prompted = apply_prompt(req, None, StructuredPath.PROMPT)
    assert prompted.json_schema is None
    assert prompted.system is not None and prompted.system.startswith("Be brief.")
    assert SCHEMA_INSTRUCTION in prompted.system and '"required": ["a"]' in prompted.system
