"""Gemini adapter: request mapping, schema conversion, reply mapping, blocks."""

from __future__ import annotations

import json

import httpx
import pytest

from agent_failover.providers.client import Budgets
from agent_failover.providers.gemini import to_gemini_schema
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, FinishReason, Message, ToolCall, ToolSpec
from tests.providers.wire import SENTINEL_KEY, endpoint, gemini_json, gemini_stream, stream_response

EP = endpoint("gemini-flash")
BUDGETS = Budgets(total_s=5, trailer_grace_s=0.05)


def q(**kw) -> ChatRequest:
    """A one-message request with overrides."""
    return ChatRequest(messages=[Message(role="user", content="q")], **kw)


async def test_request_mapping(mock_client):
    """System, roles, function calls/responses, generationConfig and the key header map."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}},
        "additionalProperties": False,
    }
    req = ChatRequest(
        system="sys",
        messages=[
            Message(role="user", content="u"),
            Message(role="assistant", tool_calls=[ToolCall(id="c1", name="f", arguments={"x": 1})]),
            Message(role="tool", tool_call_id="c1", content='{"r": 2}'),
            Message(role="tool", tool_call_id="c1", tool_name="f", content="plain"),
        ],
        max_tokens=77,
        temperature=0.1,
        stop=["END"],
        json_schema=schema,
        tools=[ToolSpec(name="f")],
        prefill="{",
        stream=False,
    )
    client, rec = mock_client(lambda _: httpx.Response(200, json=gemini_json('"a": null}')))
    async with client:
        reply = await complete(client, EP, req, BUDGETS)
    sent = rec.requests[0]
    assert str(sent.url) == (
        "http://127.0.0.1:8400/gemini-flash/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert sent.headers["x-goog-api-key"] == SENTINEL_KEY
    assert SENTINEL_KEY not in str(sent.url)
    b = json.loads(sent.content)
    assert b["systemInstruction"] == {"parts": [{"text": "sys"}]}
    assert [c["role"] for c in b["contents"]] == ["user", "model", "user", "model"]
    assert b["contents"][1]["parts"] == [{"functionCall": {"name": "f", "args": {"x": 1}}}]
    assert b["contents"][2]["parts"] == [
        {"functionResponse": {"name": "f", "response": {"r": 2}}},
        {"functionResponse": {"name": "f", "response": {"content": "plain"}}},
    ]
    assert b["contents"][3] == {"role": "model", "parts": [{"text": "{"}]}
    cfg = b["generationConfig"]
    assert cfg["maxOutputTokens"] == 77 and cfg["stopSequences"] == ["END"]
    assert cfg["responseMimeType"] == "application/json"
    assert cfg["responseJsonSchema"] == schema and "responseSchema" not in cfg
    assert reply.text == '{"a": null}'


def test_schema_conversion_recurses():
    """Nested items/anyOf are converted and unsupported keywords dropped."""
    out = to_gemini_schema(
        {
            "$schema": "x",
            "type": "array",
            "items": {"anyOf": [{"type": "integer"}, {"const": "n"}]},
            "minItems": 1,
        }
    )
    assert out == {
        "type": "ARRAY",
        "minItems": 1,
        "items": {"anyOf": [{"type": "INTEGER"}, {"enum": ["n"]}]},
    }


async def test_reply_mapping_json(mock_client):
    """Text without thoughts, model version, usage incl. thinking tokens, function calls."""
    parts = [
        {"text": "thinking...", "thought": True},
        {"text": "Calling."},
        {"functionCall": {"name": "f", "args": {"k": "v"}}},
    ]
    client, _ = mock_client(lambda _: httpx.Response(200, json=gemini_json("", parts=parts)))
    async with client:
        reply = await complete(client, EP, q(stream=False), BUDGETS)
    assert reply.text == "Calling."
    assert reply.model == "gemini-2.5-flash-001"
    assert reply.finish_reason is FinishReason.TOOL_CALLS
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (100, 20)
    assert reply.tool_calls == [ToolCall(id="call_0", name="f", arguments={"k": "v"})]


async def test_reply_mapping_stream(mock_client):
    """Stream chunks are deltas; the finishing chunk with usage ends reading at once."""
    client, rec = mock_client(lambda _: stream_response(gemini_stream(["a", "b", "c"]), hang=True))
    async with client:
        reply = await complete(client, EP, q(max_tokens=10), BUDGETS)
    assert str(rec.requests[0].url).endswith(":streamGenerateContent?alt=sse")
    assert reply.text == "abc" and reply.finish_reason is FinishReason.STOP
    assert reply.usage.output_tokens == 20


async def test_max_tokens_is_length(mock_client):
    """finishReason MAX_TOKENS normalizes to LENGTH."""
    client, _ = mock_client(lambda _: stream_response(gemini_stream(["a"], finish="MAX_TOKENS")))
    async with client:
        reply = await complete(client, EP, q(), BUDGETS)
    assert reply.finish_reason is FinishReason.LENGTH


async def test_prompt_block_is_content_filter(mock_client):
    """promptFeedback.blockReason raises ContentFilterError."""
    payload = {"promptFeedback": {"blockReason": "SAFETY"}, "modelVersion": "g"}
    client, _ = mock_client(lambda _: httpx.Response(200, json=payload))
    async with client:
        with pytest.raises(E.ContentFilterError, match="SAFETY"):
            await complete(client, EP, q(stream=False), BUDGETS)


async def test_malformed_function_call(mock_client):
    """finishReason MALFORMED_FUNCTION_CALL is a MalformedToolCallError."""
    payload = gemini_json("", finish="MALFORMED_FUNCTION_CALL")
    client, _ = mock_client(lambda _: httpx.Response(200, json=payload))
    async with client:
        with pytest.raises(E.MalformedToolCallError):
            await complete(client, EP, q(stream=False), BUDGETS)


async def test_bad_key_400_is_auth(mock_client):
    """Gemini's 400 API_KEY_INVALID is an AuthError, not an invalid request."""
    body = {
        "error": {
            "code": 400,
            "message": "API key not valid.",
            "status": "INVALID_ARGUMENT",
            "details": [{"reason": "API_KEY_INVALID"}],
        }
    }
    client, _ = mock_client(lambda _: httpx.Response(400, json=body))
    async with client:
        with pytest.raises(E.AuthError):
            await complete(client, EP, q(stream=False), BUDGETS)
