"""OpenAI / OpenAI-compatible adapter: request mapping, reply mapping, trailers, prefill."""

from __future__ import annotations

import json

import httpx
import pytest

from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, FinishReason, Message, ToolCall, ToolSpec
from tests.providers.wire import (
    SENTINEL_KEY,
    _chunk,
    endpoint,
    openai_json,
    openai_stream,
    sse,
    stream_response,
)

EP = endpoint("openai-us")
MISTRAL = endpoint("cheap-mini")
BUDGETS = Budgets(total_s=5, trailer_grace_s=0.05)


def q(**kw) -> ChatRequest:
    """A one-message request with overrides."""
    return ChatRequest(messages=[Message(role="user", content="q")], **kw)


async def test_request_mapping(mock_client):
    """Messages, tools, json_schema, limits and the bearer header map to Chat Completions."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    req = ChatRequest(
        system="sys",
        messages=[
            Message(role="user", content="u"),
            Message(role="assistant", tool_calls=[ToolCall(id="c1", name="f", arguments={"x": 1})]),
            Message(role="tool", tool_call_id="c1", content="42"),
        ],
        max_tokens=100,
        temperature=0.2,
        stop=["\n\n"],
        json_schema=schema,
        tools=[ToolSpec(name="f", description="d")],
        stream=False,
    )
    client, rec = mock_client(lambda _: httpx.Response(200, json=openai_json("ok")))
    async with client:
        await complete(client, EP, req, BUDGETS)
    sent = rec.requests[0]
    assert str(sent.url) == "http://127.0.0.1:8400/openai-us/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {SENTINEL_KEY}"
    b = json.loads(sent.content)
    assert b["messages"][0] == {"role": "system", "content": "sys"}
    assert b["messages"][2]["content"] is None
    assert b["messages"][2]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"x": 1}'}
    assert b["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "42"}
    assert b["max_completion_tokens"] == 100 and "max_tokens" not in b
    assert b["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema, "strict": False},
    }
    assert b["tools"][0]["function"]["name"] == "f"
    assert b["stop"] == ["\n\n"] and b["temperature"] == 0.2


async def test_compatible_server_gets_max_tokens_and_stream_usage(mock_client):
    """An OpenAI-compatible route gets ``max_tokens`` and is asked for streamed usage, which
    compatible servers (vLLM, Mistral, Gemini's compatible endpoint) report only when asked
    (https://platform.openai.com/docs/api-reference/chat/create#chat-create-stream_options)."""
    client, rec = mock_client(lambda _: stream_response(openai_stream(["x"])))
    async with client:
        await complete(client, MISTRAL, q(max_tokens=64), BUDGETS)
    b = json.loads(rec.requests[0].content)
    assert b["max_tokens"] == 64 and b["stream"] is True
    assert b["stream_options"] == {"include_usage": True}


async def test_stream_usage_switch_off_omits_stream_options(mock_client):
    """``capabilities.stream_usage: false`` is for a server that rejects the field."""
    ep = MISTRAL.model_copy(
        update={"capabilities": MISTRAL.capabilities.model_copy(update={"stream_usage": False})}
    )
    client, rec = mock_client(lambda _: stream_response(openai_stream(["x"])))
    async with client:
        await complete(client, ep, q(max_tokens=64), BUDGETS)
    assert "stream_options" not in json.loads(rec.requests[0].content)


async def test_stream_requests_usage_from_openai(mock_client):
    """Streaming to OpenAI itself asks for the usage chunk."""
    client, rec = mock_client(lambda _: stream_response(openai_stream(["x"])))
    async with client:
        await complete(client, EP, q(), BUDGETS)
    assert json.loads(rec.requests[0].content)["stream_options"] == {"include_usage": True}


async def test_reply_mapping_json(mock_client):
    """Text, model, finish, usage, cost and tool calls (one malformed, recorded) are mapped."""
    tool_calls = [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": '{"a": '}},
    ]
    payload = openai_json("", finish="tool_calls", tool_calls=tool_calls)
    client, _ = mock_client(lambda _: httpx.Response(200, json=payload))
    async with client:
        reply = await complete(client, EP, q(stream=False), BUDGETS)
    assert reply.model == "gpt-4.1-2025-04-14"
    assert reply.finish_reason is FinishReason.TOOL_CALLS
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (100, 20)
    assert reply.cost_usd == pytest.approx((100 * 3 + 20 * 15) / 1e6)
    assert reply.tool_calls[0] == ToolCall(id="c1", name="f", arguments={"a": 1})
    assert reply.tool_calls[1].raw_arguments == '{"a": '


async def test_reply_mapping_stream_with_tool_deltas(mock_client):
    """Streamed tool-call fragments are joined by index; usage comes from the trailer chunk."""
    chunks = [
        sse(
            None,
            _chunk(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        }
                    ],
                }
            ),
        ),
        sse(None, _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]})),
        sse(None, _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 2}"}}]})),
        sse(None, _chunk({}, "tool_calls")),
        sse(None, {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}),
        b"data: [DONE]\n\n",
    ]
    client, _ = mock_client(lambda _: stream_response(chunks))
    async with client:
        reply = await complete(client, EP, q(), BUDGETS)
    assert reply.tool_calls == [ToolCall(id="c1", name="f", arguments={"a": 2})]
    assert reply.finish_reason is FinishReason.TOOL_CALLS
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (9, 4)
    assert reply.ttft_ms is not None


async def test_finish_without_done_finalizes_within_grace(mock_client):
    """finish_reason then silence: the reply completes after the grace, not the idle budget."""
    chunks = openai_stream(["Hello"], usage=False, done=False)
    budgets = Budgets(ttft_s=5, idle_s=5, total_s=5, trailer_grace_s=0.02)
    client, _ = mock_client(lambda _: stream_response(chunks, hang=True))
    async with client:
        reply = await complete(client, EP, q(), budgets)
    assert reply.text == "Hello" and reply.finish_reason is FinishReason.STOP
    assert reply.latency_ms < 1000
    assert reply.usage.output_tokens >= 1  # estimated: the usage chunk never came


async def test_usage_then_hang_needs_no_grace(mock_client):
    """Once finish and usage both arrived, reading stops at once even if [DONE] never comes."""
    chunks = openai_stream(["Hi"], usage=True, done=False)
    budgets = Budgets(ttft_s=5, idle_s=5, total_s=5, trailer_grace_s=30)
    client, _ = mock_client(lambda _: stream_response(chunks, hang=True))
    async with client:
        reply = await complete(client, EP, q(), budgets)
    assert reply.usage.output_tokens == 20


async def test_refusal_is_content_filter(mock_client):
    """A structured-output refusal is a ContentFilterError."""
    payload = openai_json("")
    payload["choices"][0]["message"]["refusal"] = "I can't help with that."
    client, _ = mock_client(lambda _: httpx.Response(200, json=payload))
    async with client:
        with pytest.raises(E.ContentFilterError):
            await complete(client, EP, q(stream=False), BUDGETS)


async def test_prefill_unsupported_fails_over_without_request(mock_client):
    """Prefill on a route without the capability fails fast as FAILOVER, sending nothing."""
    client, rec = mock_client(lambda _: httpx.Response(200, json=openai_json("x")))
    async with client:
        with pytest.raises(E.InvalidRequestError) as info:
            await complete(client, EP, q(prefill="Once"), BUDGETS)
    assert info.value.decision is E.Decision.FAILOVER
    assert rec.requests == []


async def test_prefill_supported_uses_prefix_message(mock_client):
    """A prefill-capable compatible route gets a trailing ``prefix`` assistant message."""
    ep = endpoint("cheap-mini", capabilities={"assistant_prefill": True})
    client, rec = mock_client(lambda _: httpx.Response(200, json=openai_json(" upon a time")))
    async with client:
        reply = await complete(client, ep, q(prefill="Once", stream=False), BUDGETS)
    last = json.loads(rec.requests[0].content)["messages"][-1]
    assert last == {"role": "assistant", "content": "Once", "prefix": True}
    assert reply.text == "Once upon a time"


async def test_non_streaming_endpoint_is_called_plainly(mock_client):
    """A route without streaming capability is called without ``stream``."""
    ep = endpoint("openai-us", capabilities={"streaming": False})
    client, rec = mock_client(lambda _: httpx.Response(200, json=openai_json("x")))
    async with client:
        await complete(client, ep, q(), BUDGETS)
    assert "stream" not in json.loads(rec.requests[0].content)


async def test_no_key_env_sends_no_auth(mock_client):
    """An endpoint without ``api_key_env`` (simulator, local server) sends no auth header."""
    ep = endpoint("openai-us", api_key_env=None)
    client, rec = mock_client(lambda _: httpx.Response(200, json=openai_json("x")))
    async with client:
        await complete(client, ep, q(stream=False), BUDGETS)
    assert "authorization" not in rec.requests[0].headers


async def test_empty_tool_call_id_gets_a_generated_id(mock_client):
    """Gemini's OpenAI-compatible endpoint streams a whole tool call with ``"id": ""`` and
    no ``index`` (https://ai.google.dev/gemini-api/docs/openai, as answered on
    https://discuss.ai.google.dev/t/openai-compatibilioty-with-jnodejs-error/50746): the
    call still gets an id its tool result can answer."""
    chunk = {
        "choices": [
            {
                "delta": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "function": {"arguments": '{"k":"v"}', "name": "remember"},
                            "id": "",
                            "type": "function",
                        }
                    ],
                },
                "finish_reason": "stop",
                "index": 0,
            }
        ],
        "created": 1739723061,
        "model": "gemini-2.0-flash",
        "object": "chat.completion.chunk",
        "usage": {"completion_tokens": 54, "prompt_tokens": 4319, "total_tokens": 4373},
    }
    body = [f"data: {json.dumps(chunk)}\n\n".encode(), b"data: [DONE]\n\n"]
    client, _ = mock_client(lambda _: stream_response(body))
    async with client:
        reply = await complete(client, MISTRAL, q(), BUDGETS)
    assert [c.name for c in reply.tool_calls] == ["remember"]
    assert reply.tool_calls[0].id and reply.tool_calls[0].arguments == {"k": "v"}


async def test_empty_tool_call_id_json_reply(mock_client):
    """The same empty id in a non-streamed Chat Completions reply gets a generated id
    (https://platform.openai.com/docs/api-reference/chat/object)."""
    tool_calls = [
        {"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]
    payload = openai_json("", finish="tool_calls", tool_calls=tool_calls)
    client, _ = mock_client(lambda _: httpx.Response(200, json=payload))
    async with client:
        reply = await complete(client, MISTRAL, q(stream=False), BUDGETS)
    ids = [c.id for c in reply.tool_calls]
    assert all(ids) and len(set(ids)) == 2
