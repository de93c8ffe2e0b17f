"""The simulator speaks what real providers were seen doing, and the adapters read it.

Each case is a behaviour recorded from real traffic: Vertex Model Armor's refusal finish,
a route whose model the provider does not serve, and the rate-limit wait said only in the
vendor's reset headers (Anthropic ``anthropic-ratelimit-*-reset`` timestamps, OpenAI
``x-ratelimit-reset-*`` durations, Azure ``retry-after-ms``, Bedrock's bare
``ThrottlingException``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from agent_failover.providers.client import Budgets, build_http_client
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.testing.sim.server import RunningSimulator, start_simulator

BUDGETS = Budgets(connect_s=1.0, ttft_s=1.0, idle_s=1.0, total_s=3.0, trailer_grace_s=0.05)
ROUTES = ["anthropic-us-east", "openai-us", "gemini-flash", "bedrock-us-west-2"]


@pytest.fixture(scope="module")
async def simulator() -> AsyncIterator[RunningSimulator]:
    """One wall-clock simulator for the module."""
    server = await start_simulator()
    yield server
    await server.stop()


async def call(simulator: RunningSimulator, route: str, fault: dict, *, stream: bool = False):
    """One adapter call on ``route`` with ``fault`` set; the error it raised."""
    async with simulator.admin() as admin:
        await admin.reset()
        await admin.set_faults(route, [fault])
    ep = simulator.endpoint_config(route)
    request = ChatRequest(messages=[Message(role="user", content="hi")], stream=stream)
    async with build_http_client([ep]) as client:
        with pytest.raises(E.ProviderError) as info:
            await complete(client, ep, request, BUDGETS)
    return info.value


@pytest.mark.parametrize("stream", [False, True])
async def test_model_armor_finish_is_a_refusal(simulator, stream):
    """Vertex's ``finishReason: MODEL_ARMOR`` is a content refusal, not an empty reply."""
    fault = {"kind": "content_filter", "mode": "finish", "finish_reason": "MODEL_ARMOR"}
    err = await call(simulator, "gemini-flash", fault, stream=stream)
    assert type(err) is E.ContentFilterError and "MODEL_ARMOR" in str(err)


@pytest.mark.parametrize("route", ROUTES)
async def test_model_not_found_is_the_routes_misconfiguration(simulator, route):
    """Each wire's 404 for a model it does not serve fails over as model-not-found."""
    err = await call(simulator, route, {"kind": "http_error", "status": 404})
    assert type(err) is E.ModelNotFoundError and err.decision is E.Decision.COOLDOWN


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ("anthropic-us-east", 2.0),  # anthropic-ratelimit-requests-reset (RFC 3339)
        ("openai-us", 2.0),  # x-ratelimit-reset-requests: 2s, remaining 0
        ("azure-swedencentral", 2.0),  # retry-after-ms only
        ("gemini-flash", 2.0),  # RetryInfo.retryDelay in the body
        ("bedrock-us-west-2", None),  # ThrottlingException says no wait
    ],
)
async def test_reset_headers_set_the_wait(simulator, route, expected):
    """A 429 whose wait is said only in the vendor's reset headers still carries it."""
    err = await call(simulator, route, {"kind": "rate_limit", "retry_after": 2, "hint": "reset"})
    assert type(err) is E.RateLimitedError
    if expected is None:
        assert err.retry_after is None
    else:
        assert err.retry_after == pytest.approx(expected, abs=0.1)


async def test_reset_headers_on_the_wire(simulator):
    """The simulator's Anthropic 429 carries the documented reset headers, no Retry-After."""
    async with simulator.admin() as admin:
        await admin.reset()
        await admin.set_faults(
            "anthropic-us-east", [{"kind": "rate_limit", "retry_after": 2, "hint": "reset"}]
        )
    ep = simulator.endpoint_config("anthropic-us-east")
    async with httpx.AsyncClient() as client:
        resp = await client.post(
            f"{ep.base()}/v1/messages",
            json={
                "model": ep.model,
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "x"}],
            },
            headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        )
    assert resp.status_code == 429
    assert "retry-after" not in resp.headers
    assert resp.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert resp.headers["anthropic-ratelimit-requests-reset"].endswith("Z")


def _tool_turn(signature: str | None) -> list[dict]:
    call: dict = {"functionCall": {"name": "get_weather", "args": {}}}
    if signature is not None:
        call["thoughtSignature"] = signature
    return [
        {"role": "user", "parts": [{"text": "Weather?"}]},
        {"role": "model", "parts": [call]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {}}}]},
    ]


@pytest.mark.parametrize(
    ("model", "signature", "status"),
    [
        ("gemini-3-flash-preview", None, 400),
        ("gemini-3-flash-preview", "c2lnbmF0dXJl", 200),
        ("gemini-2.5-flash", None, 200),
    ],
)
async def test_gemini3_second_tool_turn_needs_its_signature(simulator, model, signature, status):
    """Like the real API (https://ai.google.dev/gemini-api/docs/thought-signatures), the
    simulator rejects a Gemini 3 tool turn whose functionCall part lost its signature."""
    async with simulator.admin() as admin:
        await admin.reset()
    ep = simulator.endpoint_config("gemini-flash")
    async with httpx.AsyncClient() as client:
        resp = await client.post(
            f"{ep.base()}/v1beta/models/{model}:generateContent",
            json={"contents": _tool_turn(signature)},
            headers={"x-goog-api-key": "k"},
        )
    assert resp.status_code == status, resp.text
    if status == 400:
        assert "missing a thought_signature" in resp.json()["error"]["message"]


async def test_adapter_passes_the_simulators_gemini3_check(simulator):
    """A conversation failed over from another vendor into Gemini 3 is accepted: the
    adapter sends the documented stand-in where no Gemini signature exists."""
    from agent_failover.resilience.models import ToolCall

    ep = simulator.endpoint_config("gemini-flash").model_copy(
        update={"model": "gemini-3-flash-preview"}
    )
    request = ChatRequest(
        messages=[
            Message(role="user", content="Weather?"),
            Message(role="assistant", tool_calls=[ToolCall(id="toolu_1", name="get_weather")]),
            Message(role="tool", tool_call_id="toolu_1", content="{}"),
        ],
        stream=False,
    )
    async with build_http_client([ep]) as client:
        reply = await complete(client, ep, request, BUDGETS)
    assert reply.text


@pytest.mark.parametrize("stream", [False, True])
async def test_gemini3_tool_loop_round_trips_its_signature(simulator, stream):
    """End to end on the simulator: Gemini 3 calls a function with a signature; the next
    turn carries it back and is accepted (without it the simulator answers 400)."""
    from agent_failover.resilience.models import ToolSpec

    async with simulator.admin() as admin:
        await admin.reset()
    ep = simulator.endpoint_config("gemini-flash").model_copy(
        update={"model": "gemini-3-flash-preview"}
    )
    tool = ToolSpec(name="get_weather", parameters={"type": "object", "properties": {}})
    messages = [Message(role="user", content="Weather?")]
    async with build_http_client([ep]) as client:
        first = await complete(
            client, ep, ChatRequest(messages=messages, tools=[tool], stream=stream), BUDGETS
        )
        assert [c.name for c in first.tool_calls] == ["get_weather"]
        assert first.tool_calls[0].reasoning is not None
        call = first.tool_calls[0]
        messages += [
            Message(role="assistant", tool_calls=first.tool_calls, reasoning=first.reasoning),
            Message(role="tool", tool_call_id=call.id, tool_name=call.name, content="{}"),
        ]
        second = await complete(
            client, ep, ChatRequest(messages=messages, tools=[tool], stream=stream), BUDGETS
        )
    assert second.text and not second.tool_calls
