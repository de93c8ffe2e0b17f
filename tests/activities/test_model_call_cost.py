"""call_model records what each attempt was billed: an answer its tokens and spend, a whole
body rejected by validation (a semantic failure) its spend, a failure with no body nothing;
role_context turns those figures into a persisted cost-efficiency verdict.

The replies are OpenAI chat-completion streams whose last chunk carries ``usage``
(https://platform.openai.com/docs/api-reference/chat-streaming, ``stream_options.include_usage``).
"""

from __future__ import annotations

import httpx
import pytest
from temporalio.exceptions import ApplicationError

from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import CallModelInput, RoleContextInput
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.plan import RequestFacts, SkipReason
from agent_failover.resilience.planner import plan
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.telemetry import names
from tests.providers.wire import OPENAI
from tests.telemetry.conftest import Captured, captured  # noqa: F401  (the fixture)
from tests.telemetry.test_setup import _points

ROUTE = "openai-us"
IN_TOK, OUT_TOK = 100, 20  # the usage chunk of tests.providers.wire's OpenAI stream


def _setup(respond) -> tuple[LLMActivitySet, MemoryHealthStore]:
    policy = load_policy(DEFAULT_POLICY_PATH, env={})
    health = MemoryHealthStore()
    http = httpx.AsyncClient(transport=httpx.MockTransport(respond))
    acts = LLMActivitySet(policy, http, health, MemoryResponseCache(), task_queue_for=lambda r: "q")
    return acts, health


def _stream(text: str) -> httpx.Response:
    body = b"".join(OPENAI.ok_stream([text]))
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def _input(**kw) -> CallModelInput:
    return CallModelInput(
        role="analyst",
        route=ROUTE,
        request=ChatRequest(messages=[Message(role="user", content="hi")]),
        ttft_budget_ms=2000,
        idle_budget_ms=2000,
        timeout_ms=5000,
        now=1000.0,
        **kw,
    )


def _price() -> float:
    prices = load_policy(DEFAULT_POLICY_PATH, env={}).endpoint(ROUTE).prices
    return prices.cost(IN_TOK, OUT_TOK)


async def test_answer_counts_tokens_and_spend() -> None:
    """An answer counts the provider's usage and its price at the route's list prices."""
    acts, health = _setup(lambda r: _stream("hello"))
    await acts.calls.call_model(_input())
    eff = await health.cost_efficiency(ROUTE, now=1001.0)
    assert (eff.current_attempts, eff.current_tokens) == (1, IN_TOK + OUT_TOK)
    assert eff.current_spend_usd == pytest.approx(_price())


async def test_rejected_whole_body_counts_its_spend_only() -> None:
    """Not JSON against an object schema: invalid_output, billed, no useful tokens."""
    acts, health = _setup(lambda r: _stream("not json at all"))
    with pytest.raises(ApplicationError) as info:
        await acts.calls.call_model(_input(output_schema={"type": "object"}))
    assert info.value.type == "invalid_output"
    eff = await health.cost_efficiency(ROUTE, now=1001.0)
    assert (eff.current_attempts, eff.current_tokens) == (1, 0)
    assert eff.current_spend_usd == pytest.approx(_price())


async def test_error_status_counts_nothing() -> None:
    """A 500 carries no usage: nothing billed is counted."""
    acts, health = _setup(lambda r: httpx.Response(500, json={"error": {"message": "boom"}}))
    with pytest.raises(ApplicationError):
        await acts.calls.call_model(_input())
    eff = await health.cost_efficiency(ROUTE, now=1001.0)
    assert eff.current_attempts == 0 and eff.current_spend_usd == 0.0


async def test_role_context_persists_the_cost_verdict_and_the_planner_demotes() -> None:
    """With cost_efficiency enabled, role_context judges each route's figures, persists a
    demotion for every worker and hands the planner a snapshot that demotes the route."""
    policy = load_policy(DEFAULT_POLICY_PATH, env={})
    ce = policy.cost_efficiency.model_copy(update={"enabled": True, "min_samples": 5})
    policy = policy.model_copy(update={"cost_efficiency": ce})
    health = MemoryHealthStore()
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    acts = LLMActivitySet(policy, http, health, MemoryResponseCache(), task_queue_for=lambda r: "q")
    primary = policy.routes_for("analyst")[0]
    hour = 472_222 * 3600.0
    settings = policy.breaker
    for i in range(10):  # the baseline hour: answers only
        done = CallOutcome(route=primary, at=hour - 3000 + i, ok=True, tokens=1000, cost_usd=0.01)
        await health.record(done, settings)
    for i in range(10):  # now: one answer per four billed attempts
        ok = i % 4 == 0
        now_ = CallOutcome(
            route=primary, at=hour + 60 + i, ok=ok, tokens=1000, cost_usd=0.01,
            error_class=None if ok else ErrorClass.INVALID_OUTPUT, semantic_failure=not ok,
        )  # fmt: skip
        await health.record(now_, settings)
    ctx = await acts.context.role_context(RoleContextInput(role="analyst", now=hour + 120))
    figures = ctx.snapshot.get(primary).cost
    assert figures is not None and figures.demoted and figures.since == hour + 120
    assert (await health.cost_efficiency(primary, now=hour + 121)).demoted
    facts = RequestFacts(input_tokens=100, max_output_tokens=100)
    p = plan(ctx.role, ctx.policy, ctx.snapshot, facts, hour + 120)
    assert p.attempts[0].route != primary
    assert any(s.route == primary and s.code is SkipReason.SLA_DEMOTED for s in p.skipped)


async def test_billed_rejection_is_in_the_cost_metric(
    captured: Captured,  # noqa: F811
) -> None:
    """`failover.cost` (what the cost-efficiency alert divides by) counts a billed rejected
    body's spend too, under its route and role."""
    acts, _ = _setup(lambda r: _stream("not json at all"))
    with pytest.raises(ApplicationError):
        await acts.calls.call_model(_input(output_schema={"type": "object"}))
    (point,) = _points(captured.reader)[names.COST]
    assert point.value == pytest.approx(_price())
    assert dict(point.attributes) == {"route": ROUTE, "role": "analyst"}
