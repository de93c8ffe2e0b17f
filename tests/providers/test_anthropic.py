"""Anthropic adapter: request mapping, reply mapping (plain and SSE), structured output."""

from __future__ import annotations

import json

import httpx

from agent_failover.providers import anthropic
from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.resilience.endpoint import Capabilities
from agent_failover.resilience.models import ChatRequest, FinishReason, Message, ToolCall, ToolSpec
from tests.providers.wire import SENTINEL_KEY, anthropic_json, endpoint, sse, stream_response

EP = endpoint("anthropic-us-east", max_output_tokens=1000)
#: The same route without native structured output: schemas go through the forced tool.
TOOL_EP = endpoint(
    "anthropic-us-east",
    max_output_tokens=1000,
    capabilities=Capabilities(native_json_schema=False),
)
BUDGETS = Budgets(total_s=5, trailer_grace_s=0.05)


def body_of(request: httpx.Request) -> dict:
    """The JSON body a request carried."""
    return json.loads(request.content)


async def test_request_mapping(mock_client):
    """System, tool calls/results, clamp, temperature, stop and headers map to the Messages API."""
    req = ChatRequest(
        system="be brief",
        messages=[
            Message(role="user", content="weather?"),
            Message(
                role="assistant",
                content="checking",
                tool_calls=[ToolCall(id="tu_1", name="get_weather", arguments={"city": "Oslo"})],
            ),
            Message(role="tool", tool_call_id="tu_1", content='{"temp": 3}'),
        ],
        max_tokens=5000,
        temperature=1.5,
        stop=["END"],
        stream=False,
        tools=[ToolSpec(name="get_weather", parameters={"type": "object"})],
    )
    client, rec = mock_client(lambda _: httpx.Response(200, json=anthropic_json("ok")))
    async with client:
        await complete(client, EP, req, BUDGETS)
    sent = rec.requests[0]
    assert str(sent.url) == "http://127.0.0.1:8400/anthropic-us-east/v1/messages"
    assert sent.headers["x-api-key"] == SENTINEL_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    b = body_of(sent)
    assert b["system"] == "be brief"
    assert b["max_tokens"] == 1000  # clamped to the endpoint's output cap
    assert b["temperature"] == 1.0  # Anthropic's range tops out at 1
    assert b["stop_sequences"] == ["END"]
    assert "stream" not in b
    assert b["tools"][0]["input_schema"] == {"type": "object"}
    assert [m["role"] for m in b["messages"]] == ["user", "assistant", "user"]
    assert b["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "tu_1",
        "name": "get_weather",
        "input": {"city": "Oslo"},
    }
    assert b["messages"][2]["content"][0]["type"] == "tool_result"


async def test_reply_mapping_json(mock_client):
    """Text, model from the body, normalized finish, usage incl. cache, cost and tool calls."""
    blocks = [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "tu_9", "name": "lookup", "input": {"q": "x"}},
    ]
    payload = anthropic_json("", stop="tool_use", blocks=blocks)
    client, _ = mock_client(lambda _: httpx.Response(200, json=payload))
    async with client:
        reply = await complete(
            client,
            EP,
            ChatRequest(messages=[Message(role="user", content="q")], stream=False),
            BUDGETS,
        )
    assert reply.text == "Let me check."
    assert reply.model == "claude-sonnet-4-5-20250929"
    assert reply.finish_reason is FinishReason.TOOL_CALLS
    assert reply.usage.input_tokens == 105 and reply.usage.output_tokens == 20
    assert reply.cost_usd == (105 * 3.0 + 20 * 15.0) / 1e6
    assert reply.tool_calls == [ToolCall(id="tu_9", name="lookup", arguments={"q": "x"})]
    assert reply.ttft_ms is None and reply.latency_ms > 0


async def test_reply_mapping_stream(mock_client):
    """A streamed reply assembles text, usage and finish, with ttft measured."""
    chunks = [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {"model": "claude-sonnet-4-5-20250929", "usage": {"input_tokens": 50}},
            },
        ),
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        b": keep-alive comment\n\n",
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hi "},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "there"},
            },
        ),
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "tu_1", "name": "f", "input": {}},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"a":'},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": " 1}"},
            },
        ),
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "max_tokens"},
                "usage": {"output_tokens": 7},
            },
        ),
        sse("message_stop", {"type": "message_stop"}),
    ]
    client, rec = mock_client(lambda _: stream_response(chunks))
    async with client:
        reply = await complete(
            client, EP, ChatRequest(messages=[Message(role="user", content="q")]), BUDGETS
        )
    assert body_of(rec.requests[0])["stream"] is True
    assert reply.text == "Hi there"
    assert reply.finish_reason is FinishReason.LENGTH
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (50, 7)
    assert reply.tool_calls == [ToolCall(id="tu_1", name="f", arguments={"a": 1})]
    assert reply.ttft_ms is not None and reply.ttft_ms <= reply.latency_ms


async def test_json_schema_uses_forced_tool(mock_client):
    """Without native structured output, json_schema forces the structured-output tool; its
    input is the reply text, not a call."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    blocks = [{"type": "tool_use", "id": "t", "name": anthropic.JSON_TOOL, "input": {"n": 4}}]
    client, rec = mock_client(
        lambda _: httpx.Response(200, json=anthropic_json("", stop="tool_use", blocks=blocks))
    )
    req = ChatRequest(
        messages=[Message(role="user", content="q")], json_schema=schema, stream=False
    )
    async with client:
        reply = await complete(client, TOOL_EP, req, BUDGETS)
    b = body_of(rec.requests[0])
    assert b["tool_choice"] == {"type": "tool", "name": anthropic.JSON_TOOL}
    assert b["tools"][-1]["input_schema"] == schema
    assert json.loads(reply.text) == {"n": 4}
    assert reply.tool_calls == [] and reply.finish_reason is FinishReason.STOP


async def test_json_schema_non_object_is_wrapped_stream(mock_client):
    """A non-object schema is wrapped for the tool and unwrapped from a streamed answer."""
    schema = {"type": "array", "items": {"type": "string"}}
    chunks = [
        sse(
            None, {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 1}}}
        ),
        sse(
            None,
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {
                    "type": "tool_use",
                    "id": "t",
                    "name": anthropic.JSON_TOOL,
                    "input": {},
                },
            },
        ),
        sse(
            None,
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"value": ["a",'},
            },
        ),
        sse(
            None,
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": ' "b"]}'},
            },
        ),
        sse(
            None,
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 3},
            },
        ),
        sse(None, {"type": "message_stop"}),
    ]
    client, rec = mock_client(lambda _: stream_response(chunks))
    req = ChatRequest(messages=[Message(role="user", content="q")], json_schema=schema)
    async with client:
        reply = await complete(client, EP, req, BUDGETS)
    assert body_of(rec.requests[0])["tools"][0]["input_schema"]["properties"]["value"] == schema
    assert json.loads(reply.text) == ["a", "b"]
    assert reply.finish_reason is FinishReason.STOP


async def test_prefill_is_trailing_assistant_turn(mock_client):
    """A prefill is sent trimmed as the last assistant turn and prepended to the reply text."""
    client, rec = mock_client(lambda _: httpx.Response(200, json=anthropic_json(' "b": 2}')))
    req = ChatRequest(
        messages=[Message(role="user", content="q")], prefill='{"a": 1, ', stream=False
    )
    async with client:
        reply = await complete(client, EP, req, BUDGETS)
    last = body_of(rec.requests[0])["messages"][-1]
    assert last == {"role": "assistant", "content": '{"a": 1,'}
    assert reply.text == '{"a": 1, "b": 2}'


async def test_stream_ignored_by_server(mock_client):
    """A server answering a stream request with plain JSON still yields a full reply."""
    client, _ = mock_client(lambda _: httpx.Response(200, json=anthropic_json("plain")))
    async with client:
        reply = await complete(
            client, EP, ChatRequest(messages=[Message(role="user", content="q")]), BUDGETS
        )
    assert reply.text == "plain" and reply.ttft_ms is not None
