"""Two workers share one rate budget through Redis: call_model reserves before the call,
settles with the reported usage, refuses with ``rate_budget`` (and when it refills) once
the shared bucket is empty, and the role context reports the budget so the planner skips
the route with RATE_BUDGET until it refills (injected ``now``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import yaml
from temporalio.exceptions import ApplicationError

from agent_failover.activities import model_call
from agent_failover.activities.health_models import HealthTableInput
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import CallModelInput, RoleContextInput
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import parse_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.estimate import estimate_request_tokens
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.outcomes import RATE_BUDGET
from agent_failover.resilience.plan import RequestFacts, SkipReason
from agent_failover.resilience.planner import plan
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from tests.providers.wire import OPENAI
from tests.stores.conftest import _delete_namespace

T0 = 1_700_000_000.0
ROUTE = "openai-us"
ROLE = "analyst"  # not critical, bulkhead "specialists"
REQUEST = ChatRequest(messages=[Message(role="user", content="hi")], max_tokens=2000)


@pytest.fixture(scope="module")
def policy() -> PolicyConfig:
    """The demo policy with 3 requests/min on openai-us and a token budget on the bulkhead."""
    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    data["rate_budgets"] = {
        "endpoints": {ROUTE: {"requests_per_minute": 3}},
        "bulkheads": {"specialists": {"tokens_per_minute": 100_000}},
    }
    return parse_policy(data, env={})


def _reply(_: httpx.Request) -> httpx.Response:
    blocks = OPENAI.ok_stream(["ok"])  # reports 100 prompt + 20 completion tokens

    async def body() -> AsyncIterator[bytes]:
        for b in blocks:
            yield b

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


@pytest.fixture
async def workers(
    policy: PolicyConfig, redis_url: str, namespace: str
) -> AsyncIterator[list[LLMActivitySet]]:
    """Two workers: each its own HTTP client and its own Redis store, one namespace."""
    out, stores = [], []
    for _ in range(2):
        store = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
        stores.append(store)
        http = httpx.AsyncClient(transport=httpx.MockTransport(_reply))
        out.append(
            LLMActivitySet(policy, http, store, MemoryResponseCache(), task_queue_for=lambda r: "q")
        )
    try:
        yield out
    finally:
        for s in stores:
            await s.close()
        await _delete_namespace(redis_url, namespace)


@pytest.fixture(autouse=True)
def _workflow_clock_stands_still(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every attempt happens at its injected ``now``: without this the activity adds the
    real time it took (``workflow_now``), and a loaded machine's slow call refills the
    buckets between the take and the read (60 tokens every 36 ms at 100k tokens/min)."""
    monkeypatch.setattr(model_call, "workflow_now", lambda base, _started: base)


def _call(now: float) -> CallModelInput:
    return CallModelInput(
        role=ROLE,
        route=ROUTE,
        request=REQUEST,
        ttft_budget_ms=2000,
        idle_budget_ms=2000,
        timeout_ms=5000,
        now=now,
    )


async def test_two_workers_share_one_budget(
    workers: list[LLMActivitySet], policy: PolicyConfig
) -> None:
    """Three calls per minute across both workers; the fourth is refused, then planned
    around with RATE_BUDGET, and the route is back once the bucket refilled."""
    a, b = workers
    for worker in (a, b, a):
        result = await worker.calls.call_model(_call(T0))
        assert result.reply.text == "ok"
    with pytest.raises(ApplicationError) as info:
        await b.calls.call_model(_call(T0 + 1))
    err = info.value
    assert err.type == RATE_BUDGET and err.non_retryable
    assert err.details[0]["scope"] == f"endpoint:{ROUTE}"
    # One request every 20 s; 1 s (plus the call's own few ms) already refilled.
    assert 18.5 < err.details[0]["retry_after_s"] < 19.5

    ctx = await a.context.role_context(RoleContextInput(role=ROLE, now=T0 + 1))
    facts = RequestFacts(
        input_tokens=estimate_request_tokens(REQUEST), max_output_tokens=REQUEST.max_tokens
    )
    p = plan(ctx.role, ctx.policy, ctx.snapshot, facts, T0 + 1)
    assert ROUTE not in [x.route for x in p.attempts]
    assert any(s.route == ROUTE and s.code is SkipReason.RATE_BUDGET for s in p.skipped)

    ctx = await b.context.role_context(RoleContextInput(role=ROLE, now=T0 + 21))
    p = plan(ctx.role, ctx.policy, ctx.snapshot, facts, T0 + 21)
    assert ROUTE in [x.route for x in p.attempts]
    assert (await b.calls.call_model(_call(T0 + 21))).reply.text == "ok"


async def test_tokens_settle_with_reported_usage(workers: list[LLMActivitySet]) -> None:
    """The bulkhead's token bucket ends charged with the usage (120), not the estimate."""
    a, b = workers
    await a.calls.call_model(_call(T0))
    table = await b.health.health_table(HealthTableInput(now=T0, routes=[ROUTE]))
    tokens = next(lv for lv in table.budgets if lv.scope == "bulkhead:specialists")
    # Charged exactly the usage, 120 tokens, not the estimate (+2000 max_tokens).
    assert tokens.level == pytest.approx(100_000 - 120, abs=1e-6)
    requests = next(lv for lv in table.budgets if lv.scope == f"endpoint:{ROUTE}")
    assert requests.level == pytest.approx(2.0, abs=1e-9)
