"""Quality activities against the simulator: local and judge scoring, one golden item."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agent_failover.activities.quality import (
    QUALITY_CONFIG_ERROR,
    QualifyItemInput,
    QualityActivities,
    ScoreAnswerInput,
)
from agent_failover.resilience.config import (
    PolicyConfig,
    PromptRegistry,
    PromptVariant,
    QualificationSettings,
)
from agent_failover.resilience.qualification import GoldenItem
from agent_failover.resilience.quality import ScorerSpec
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.faults import Fault, FaultKind

CRITIC_ITEM = GoldenItem(
    id="c1",
    prompt='Review the claim and reply in JSON. Claim: 12 * 12 = 144\nPut the answer in "verdict"',
    expected={"verdict": "approve"},
)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def _acts(policy: PolicyConfig, http: httpx.AsyncClient, judge: str | None = None):
    """Activities over the demo policy with ``judge`` as its judge route (None: no judge)."""
    settings = QualificationSettings(judge_route=judge)
    policy = policy.model_copy(update={"qualification": settings})
    return QualityActivities(policy, http)


async def test_local_scoring_needs_no_model(policy: PolicyConfig, http, sim_admin: SimAdmin):
    """exact/normalized/json are graded in-process: the simulator sees no request."""
    result = await _acts(policy, http).score_answer(
        ScoreAnswerInput(spec=ScorerSpec(kind="normalized"), expected="Paris", answer="paris.")
    )
    assert result.passed and result.score == 1.0
    assert await sim_admin.attempts() == []


async def test_judge_scoring_calls_the_judge_route(policy, http, sim_admin: SimAdmin):
    """kind judge: one call to the policy's judge route; its verdict is the score."""
    acts = _acts(policy, http, judge="openai-us")
    await sim_admin.set_accuracy("openai-us", 1.0)
    spec = ScorerSpec(kind="judge")
    same = await acts.score_answer(
        ScoreAnswerInput(spec=spec, prompt="capital?", expected="Paris", answer="Paris")
    )
    diff = await acts.score_answer(
        ScoreAnswerInput(spec=spec, prompt="capital?", expected="Paris", answer="Lyon")
    )
    assert (same.score, diff.score) == (1.0, 0.0)
    assert [a.endpoint for a in await sim_admin.attempts()] == ["openai-us", "openai-us"]


async def test_judge_without_a_route_is_a_config_error(policy, http) -> None:
    """No judge route anywhere: a non-retryable error that says which key to set."""
    with pytest.raises(ApplicationError) as info:
        await _acts(policy, http).score_answer(
            ScoreAnswerInput(spec=ScorerSpec(kind="judge"), expected="a", answer="b")
        )
    assert info.value.type == QUALITY_CONFIG_ERROR and info.value.non_retryable
    assert "qualification.judge_route" in info.value.message


async def test_qualify_item_grades_schema_and_answer(policy, http, sim_admin: SimAdmin):
    """A golden item on a right and on a wrong endpoint: schema ok both, score 1 vs 0."""
    await sim_admin.set_accuracy("anthropic-us-east", 1.0)
    await sim_admin.set_accuracy("cheap-mini", 0.0)
    spec = ScorerSpec(kind="json", fields=["verdict"])
    acts = _acts(policy, http)
    good, bad = [
        await acts.qualify_item(
            QualifyItemInput(role="critic", route=r, item=CRITIC_ITEM, scorer=spec, timeout_s=5)
        )
        for r in ("anthropic-us-east", "cheap-mini")
    ]
    assert (good.ok, good.schema_ok, good.score, good.passed) == (True, True, 1.0, True)
    assert (bad.ok, bad.schema_ok, bad.score) == (True, True, 0.0)
    assert good.latency_ms is not None and good.latency_ms > 0
    assert '"approve"' in good.answer_excerpt and '"revise"' in bad.answer_excerpt


async def test_qualify_item_retries_transient_then_records(policy, http, sim_admin: SimAdmin):
    """A 500 is raised for Temporal to retry while attempts remain, then recorded as data."""
    await sim_admin.set_faults("openai-us", [Fault(kind=FaultKind.SERVER_ERROR)])
    inp = QualifyItemInput(
        role="critic",
        route="openai-us",
        item=CRITIC_ITEM,
        scorer=ScorerSpec(kind="json"),
        timeout_s=5,
        max_attempts=2,
    )
    acts = _acts(policy, http)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=1)
    with pytest.raises(ApplicationError) as info:
        await env.run(acts.qualify_item, inp)
    assert info.value.type == "server_error" and not info.value.non_retryable
    env.info = dataclasses.replace(env.info, attempt=2)
    last = await env.run(acts.qualify_item, inp)
    assert (last.ok, last.error_class, last.score) == (False, "server_error", 0.0)


async def test_qualify_item_uses_the_routes_prompt_variant(policy, http, sim_admin: SimAdmin):
    """Each route is qualified with the prompt it would get in production: the role's
    variant for its provider, and the schema written into the prompt on a route without
    native structured output; the answer is still graded right."""
    role = policy.role("critic")
    prompts = PromptRegistry(providers={"openai": PromptVariant(system_prompt="VARIANT-X")})
    role = role.model_copy(update={"prompts": prompts})
    ep = policy.endpoint("openai-us")
    ep = ep.model_copy(
        update={"capabilities": ep.capabilities.model_copy(update={"structured_output": False})}
    )
    policy = policy.model_copy(
        update={
            "roles": {**policy.roles, "critic": role},
            "endpoints": {**policy.endpoints, "openai-us": ep},
        }
    )
    await sim_admin.set_accuracy("openai-us", 1.0)
    spec = ScorerSpec(kind="json", fields=["verdict"])
    inp = QualifyItemInput(
        role="critic", route="openai-us", item=CRITIC_ITEM, scorer=spec, timeout_s=5
    )
    out = await _acts(policy, http).qualify_item(inp)
    [attempt] = await sim_admin.attempts()
    assert attempt.system.startswith("VARIANT-X") and "JSON Schema" in attempt.system
    assert (out.schema_ok, out.score) == (True, 1.0)
