"""call_model keeps what enters history bounded: replies, failure details, heartbeats;
and a route this worker's policy does not know is a non-retryable policy error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agent_failover.activities import model_call
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.model_call import HEARTBEAT_TAIL_CHARS
from agent_failover.activities.models import CallModelInput, RoleContextInput
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.limits import MAX_FAILURE_MESSAGE_CHARS, PARTIAL_TEXT_TAIL_CHARS
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore
from tests.providers.wire import OPENAI

CHUNK = "x" * 1000


@pytest.fixture(scope="module")
def demo_policy() -> PolicyConfig:
    """The demo policy (its base URLs never reached: a mock transport answers)."""
    return load_policy(DEFAULT_POLICY_PATH, env={})


def _acts(policy: PolicyConfig, respond) -> LLMActivitySet:
    http = httpx.AsyncClient(transport=httpx.MockTransport(respond))
    return LLMActivitySet(
        policy, http, MemoryHealthStore(), MemoryResponseCache(), task_queue_for=lambda r: "q"
    )


def _stream(chunks: int, *, terminal: bool) -> httpx.Response:
    blocks = OPENAI.ok_stream([CHUNK] * chunks)
    if not terminal:
        blocks = OPENAI.cut(blocks)

    async def body() -> AsyncIterator[bytes]:
        for b in blocks:
            yield b

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def _input(**kw) -> CallModelInput:
    fields = {
        "role": "analyst",
        "route": "openai-us",
        "request": ChatRequest(messages=[Message(role="user", content="hi")]),
        "ttft_budget_ms": 2000,
        "idle_budget_ms": 2000,
        "timeout_ms": 5000,
        "now": 1000.0,
        **kw,
    }
    return CallModelInput(**fields)


async def test_cut_stream_failure_carries_only_a_tail(demo_policy: PolicyConfig) -> None:
    """A stream cut after 300 kB fails with the last 4 KB of its text in the details, the
    full length counted and the cut flagged; the message stays short."""
    acts = _acts(demo_policy, lambda r: _stream(300, terminal=False))
    with pytest.raises(ApplicationError) as info:
        await acts.calls.call_model(_input(max_reply_bytes=700_000))
    err = info.value
    details = err.details[0]
    assert err.type == "stream_cut"
    assert len(details["partial_text"]) == PARTIAL_TEXT_TAIL_CHARS
    assert details["partial_truncated"] and details["partial_chars"] == 300 * len(CHUNK)
    assert len(err.message) <= MAX_FAILURE_MESSAGE_CHARS
    assert len(json.dumps(details)) < 2 * PARTIAL_TEXT_TAIL_CHARS


async def test_reply_over_the_role_limit_is_oversized_and_not_retried(
    demo_policy: PolicyConfig,
) -> None:
    """Above max_reply_bytes the attempt fails as oversized_output, non-retryable (the
    workflow fails over); the route's semantic-failure rate sees it."""
    acts = _acts(demo_policy, lambda r: _stream(100, terminal=True))
    with pytest.raises(ApplicationError) as info:
        await acts.calls.call_model(_input(max_reply_bytes=20_000))
    assert info.value.type == "oversized_output" and info.value.non_retryable
    assert len(info.value.details[0]["partial_text"]) <= PARTIAL_TEXT_TAIL_CHARS
    snap = await acts.deps.health.snapshot(["openai-us"], now=1001.0, window_s=60, min_calls=1)
    assert snap.get("openai-us").stats.semantic_failure_rate > 0


def _slow_stream(chunks: int, pause_s: float) -> httpx.Response:
    blocks = OPENAI.ok_stream([CHUNK] * chunks)

    async def body() -> AsyncIterator[bytes]:
        for b in blocks:
            await asyncio.sleep(pause_s)
            yield b

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


async def test_heartbeats_carry_a_bounded_tail(
    demo_policy: PolicyConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every heartbeat of a long stream carries at most the last 400 characters."""
    monkeypatch.setattr(model_call, "HEARTBEAT_EVERY_S", 0.01)
    acts = _acts(demo_policy, lambda r: _slow_stream(40, 0.005))
    env = ActivityEnvironment()
    beats: list[dict] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    result = await env.run(acts.calls.call_model, _input())
    assert len(result.reply.text) == 40 * len(CHUNK)
    assert any(b["tokens"] > 0 for b in beats), beats
    assert all(len(b["partial"]) <= HEARTBEAT_TAIL_CHARS for b in beats)


async def test_a_call_that_answers_within_the_interval_sends_no_heartbeat(
    demo_policy: PolicyConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The healthy path costs no heartbeat: the first one is due one interval in."""
    monkeypatch.setattr(model_call, "HEARTBEAT_EVERY_S", 60.0)  # no slow machine reaches it
    acts = _acts(demo_policy, lambda r: _slow_stream(5, 0.01))
    env = ActivityEnvironment()
    beats: list[dict] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    await env.run(acts.calls.call_model, _input())
    assert beats == []


async def test_unknown_route_is_a_non_retryable_policy_error(demo_policy: PolicyConfig) -> None:
    """A worker asked to call a route its policy lacks says so once, naming the known ones."""
    acts = _acts(demo_policy, lambda r: httpx.Response(500))
    with pytest.raises(ApplicationError) as info:
        await acts.calls.call_model(_input(route="gpt-x"))
    assert info.value.type == "policy_error" and info.value.non_retryable
    assert "gpt-x" in str(info.value) and "openai-us" in str(info.value)


async def test_role_context_subset_decodes_like_the_workflow_will(
    demo_policy: PolicyConfig,
) -> None:
    """A role whose roster leaves out endpoints with breaker overrides gets a subset without
    them, which survives the JSON round trip into the workflow."""
    from agent_failover.activities.models import RoleContext

    analyst = demo_policy.role("analyst")
    solo = analyst.model_copy(
        update={
            "name": "solo",
            "roster": analyst.roster.model_copy(
                update={"tier0": ["openai-us"], "tier1": [], "tier2": []}
            ),
        }
    )
    policy = demo_policy.model_copy(update={"roles": {**demo_policy.roles, "solo": solo}})
    assert {"cheap-mini", "gemini-flash"} <= set(policy.breaker_overrides)
    ctx = await _acts(policy, lambda r: httpx.Response(500)).context.role_context(
        RoleContextInput(role="solo", now=1000.0)
    )
    again = RoleContext.model_validate_json(ctx.model_dump_json())
    assert set(again.policy.endpoints) == {"openai-us"} and again.policy.breaker_overrides == {}
