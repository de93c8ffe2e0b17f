"""Structured output beside the caller's tools, on Anthropic and Bedrock Converse.

Forcing the structured-output tool (``tool_choice: {type: tool}`` /
``toolChoice: {tool}``) makes the model call that tool and nothing else, so with user
tools declared the model could never call them. Written from Anthropic's tool-use guide
("Forcing tool use", https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use#forcing-tool-use)
and Bedrock's ``ToolChoice`` reference
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ToolChoice.html):
with user tools, the JSON tool is offered under ``auto`` and the final answer validated.

Where Anthropic's own structured outputs exist (the structured outputs guide,
https://platform.claude.com/docs/en/build-with-claude/structured-outputs: JSON outputs
are requested with ``output_config: {format: {type: "json_schema", schema}}``, need no
beta header since general availability, require ``additionalProperties: false`` on
objects, and come back as the JSON in the response's text content block), the schema
goes there instead and no tool is forced: the routes in the ``native`` tests below.
Bedrock Converse has its own: ``outputConfig.textFormat`` (``OutputConfig``,
``OutputFormat`` with ``type: json_schema`` and ``structure.jsonSchema``, whose ``schema``
is a JSON *string*: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_OutputFormat.html,
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_JsonSchemaDefinition.html;
the answer is the message's text block).
"""

from __future__ import annotations

import json

import httpx

from agent_failover.providers import anthropic
from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.providers.validate import validate_reply
from agent_failover.resilience.endpoint import Capabilities
from agent_failover.resilience.models import ChatRequest, FinishReason, Message, ToolSpec
from tests.providers.wire import (
    anthropic_json,
    anthropic_stream,
    bedrock_json,
    endpoint,
    stream_response,
)

BUDGETS = Budgets(total_s=5)
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
LOOKUP = ToolSpec(
    name="lookup",
    description="look a number up",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)


#: The Anthropic route with native structured output turned off: the tool path.
TOOL_PATH = {"capabilities": Capabilities(native_json_schema=False)}


def ask(**kw) -> ChatRequest:
    """A structured request with one user tool."""
    return ChatRequest(
        messages=[Message(role="user", content="q")],
        json_schema=SCHEMA,
        tools=[LOOKUP],
        stream=False,
        **kw,
    )


async def _call(mock_client, ep, payload, request):
    client, rec = mock_client(lambda _: httpx.Response(200, json=payload))
    async with client:
        reply = await complete(client, ep, request, BUDGETS)
    return reply, json.loads(rec.requests[0].content)


async def test_anthropic_user_tool_can_be_called(mock_client):
    """The JSON tool is offered, not forced; the model's call to the user's tool comes back."""
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}}]
    payload = anthropic_json("", stop="tool_use", blocks=blocks)
    reply, body = await _call(
        mock_client, endpoint("anthropic-us-east", **TOOL_PATH), payload, ask()
    )
    assert body["tool_choice"] == {"type": "auto"}
    assert [t["name"] for t in body["tools"]] == ["lookup", anthropic.JSON_TOOL]
    assert anthropic.JSON_TOOL in body["system"]
    assert [c.name for c in reply.tool_calls] == ["lookup"]
    assert reply.finish_reason is FinishReason.TOOL_CALLS
    validate_reply(reply, SCHEMA, endpoint="e")  # a tool turn is not judged by the schema


async def test_anthropic_final_answer_through_the_json_tool(mock_client):
    """The next turn's structured_output call is the answer, validated against the schema."""
    blocks = [{"type": "tool_use", "id": "toolu_2", "name": anthropic.JSON_TOOL, "input": {"n": 7}}]
    payload = anthropic_json("", stop="tool_use", blocks=blocks)
    reply, _ = await _call(mock_client, endpoint("anthropic-us-east", **TOOL_PATH), payload, ask())
    assert reply.tool_calls == [] and reply.finish_reason is FinishReason.STOP
    assert validate_reply(reply, SCHEMA, endpoint="e") == {"n": 7}


async def test_anthropic_caller_choice_is_kept(mock_client):
    """``required`` stays Anthropic's ``any``; ``none`` (no user tool callable) forces JSON."""
    payload = anthropic_json("", stop="tool_use", blocks=[])
    _, body = await _call(
        mock_client,
        endpoint("anthropic-us-east", **TOOL_PATH),
        payload,
        ask(tool_choice="required"),
    )
    assert body["tool_choice"] == {"type": "any"}
    _, body = await _call(
        mock_client, endpoint("anthropic-us-east", **TOOL_PATH), payload, ask(tool_choice="none")
    )
    assert body["tool_choice"] == {"type": "tool", "name": anthropic.JSON_TOOL}


async def test_bedrock_user_tool_can_be_called(mock_client):
    """Converse: ``toolChoice.auto`` beside user tools; the user's toolUse comes back."""
    blocks = [{"toolUse": {"toolUseId": "tooluse_1", "name": "lookup", "input": {"q": "x"}}}]
    payload = bedrock_json("", stop="tool_use", blocks=blocks)
    reply, body = await _call(
        mock_client, endpoint("bedrock-us-west-2", **TOOL_PATH), payload, ask()
    )
    config = body["toolConfig"]
    assert config["toolChoice"] == {"auto": {}}
    assert [t["toolSpec"]["name"] for t in config["tools"]] == ["lookup", anthropic.JSON_TOOL]
    assert anthropic.JSON_TOOL in body["system"][0]["text"]
    assert [c.name for c in reply.tool_calls] == ["lookup"]


async def test_bedrock_without_user_tools_still_forces_json(mock_client):
    """No user tools: the JSON tool is still forced, the most reliable structured output."""
    blocks = [{"toolUse": {"toolUseId": "t", "name": anthropic.JSON_TOOL, "input": {"n": 1}}}]
    payload = bedrock_json("", stop="tool_use", blocks=blocks)
    request = ChatRequest(
        messages=[Message(role="user", content="q")], json_schema=SCHEMA, stream=False
    )
    reply, body = await _call(
        mock_client, endpoint("bedrock-us-west-2", **TOOL_PATH), payload, request
    )
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": anthropic.JSON_TOOL}}
    assert json.loads(reply.text) == {"n": 1}


async def test_anthropic_native_schema_beside_user_tools(mock_client):
    """Native: ``output_config.format`` carries the schema (objects closed), the user's
    tools are offered under ``auto``, no ``structured_output`` tool and no hint."""
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}}]
    payload = anthropic_json("", stop="tool_use", blocks=blocks)
    client, rec = mock_client(lambda _: httpx.Response(200, json=payload))
    async with client:
        reply = await complete(client, endpoint("anthropic-us-east"), ask(), BUDGETS)
    body = json.loads(rec.requests[0].content)
    assert body["output_config"] == {
        "format": {"type": "json_schema", "schema": {**SCHEMA, "additionalProperties": False}}
    }
    assert "output_format" not in body
    assert "anthropic-beta" not in rec.requests[0].headers
    assert body["tool_choice"] == {"type": "auto"}
    assert [t["name"] for t in body["tools"]] == ["lookup"]
    assert "system" not in body
    assert [c.name for c in reply.tool_calls] == ["lookup"]


async def test_anthropic_native_answer_is_the_text_block(mock_client):
    """The documented response: the JSON in a text block, ``end_turn``; validated."""
    payload = anthropic_json('{"n": 7}')
    reply, body = await _call(mock_client, endpoint("anthropic-us-east"), payload, ask())
    assert "output_config" in body
    assert reply.finish_reason is FinishReason.STOP and reply.tool_calls == []
    assert validate_reply(reply, SCHEMA, endpoint="e") == {"n": 7}


async def test_anthropic_native_without_user_tools(mock_client):
    """No user tools: no tools, no ``tool_choice`` at all, only ``output_config``."""
    request = ChatRequest(
        messages=[Message(role="user", content="q")], json_schema=SCHEMA, stream=False
    )
    reply, body = await _call(
        mock_client, endpoint("anthropic-us-east"), anthropic_json('{"n": 2}'), request
    )
    assert "tools" not in body and "tool_choice" not in body
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert json.loads(reply.text) == {"n": 2}


def test_anthropic_native_only_where_supported():
    """Default: the Claude API with a listed model; not an older model, not Vertex, not a
    non-object schema or a prefill; the capability overrides the model list."""
    request = ask()
    assert anthropic.native_json(endpoint("anthropic-us-east"), request)
    assert not anthropic.native_json(
        endpoint("anthropic-us-east", model="claude-3-5-haiku-20241022"), request
    )
    assert anthropic.native_json(
        endpoint(
            "anthropic-us-east",
            model="claude-3-5-haiku-20241022",
            capabilities=Capabilities(native_json_schema=True),
        ),
        request,
    )
    assert not anthropic.native_json(endpoint("vertex-europe-west1"), request)
    assert not anthropic.native_json(endpoint("anthropic-us-east"), ask(prefill='{"n": '))
    listed = ask().model_copy(update={"json_schema": {"type": "array"}})
    assert not anthropic.native_json(endpoint("anthropic-us-east"), listed)


def test_closed_schema_closes_nested_objects_only_where_unset():
    """``additionalProperties: false`` on every object, nested and in ``$defs``; an
    explicit value is kept; the caller's schema is not changed."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"$ref": "#/$defs/P"}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "$defs": {"P": {"type": "object", "properties": {"x": {"type": "string"}}}},
    }
    closed = anthropic.closed_schema(schema)
    assert closed["additionalProperties"] is False
    assert closed["$defs"]["P"]["additionalProperties"] is False
    assert closed["properties"]["m"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in schema


async def test_bedrock_native_schema_beside_user_tools(mock_client):
    """Converse native: ``outputConfig.textFormat`` with the closed schema as a string, the
    user's tool under ``toolChoice.auto``, no JSON tool; the text answer is validated."""
    payload = bedrock_json('{"n": 3}')
    reply, body = await _call(mock_client, endpoint("bedrock-us-west-2"), payload, ask())
    fmt = body["outputConfig"]["textFormat"]
    assert fmt["type"] == "json_schema"
    definition = fmt["structure"]["jsonSchema"]
    assert isinstance(definition["schema"], str)
    assert json.loads(definition["schema"]) == {**SCHEMA, "additionalProperties": False}
    config = body["toolConfig"]
    assert config["toolChoice"] == {"auto": {}}
    assert [t["toolSpec"]["name"] for t in config["tools"]] == ["lookup"]
    assert "system" not in body
    assert validate_reply(reply, SCHEMA, endpoint="e") == {"n": 3}


async def test_bedrock_native_default_by_model(mock_client):
    """Unset capability: on for a listed Claude model id or inference profile, off for
    another Bedrock model (the tool path, forced without user tools)."""
    plain = ChatRequest(
        messages=[Message(role="user", content="q")], json_schema=SCHEMA, stream=False
    )
    for model in (
        "anthropic.claude-haiku-4-5-20251001-v1:0",
        "global.anthropic.claude-opus-4-6-v1",
    ):
        assert anthropic.native_json(endpoint("bedrock-us-west-2", model=model), plain)
    other = endpoint("bedrock-us-west-2", model="meta.llama3-70b-instruct-v1:0")
    assert not anthropic.native_json(other, plain)
    blocks = [{"toolUse": {"toolUseId": "t", "name": anthropic.JSON_TOOL, "input": {"n": 1}}}]
    _, body = await _call(
        mock_client, other, bedrock_json("", stop="tool_use", blocks=blocks), plain
    )
    assert "outputConfig" not in body
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": anthropic.JSON_TOOL}}


async def test_anthropic_native_streamed_answer(mock_client):
    """Streamed: the JSON arrives as ``text_delta`` events of the text block (the stream
    shape of the Messages API) and is the validated answer; the body asked to stream."""
    chunks = anthropic_stream(['{"n"', ": 5}"])
    client, rec = mock_client(lambda _: stream_response(chunks))
    request = ask().model_copy(update={"stream": True})
    async with client:
        reply = await complete(client, endpoint("anthropic-us-east"), request, BUDGETS)
    body = json.loads(rec.requests[0].content)
    assert body["stream"] is True and "output_config" in body
    assert reply.finish_reason is FinishReason.STOP
    assert validate_reply(reply, SCHEMA, endpoint="e") == {"n": 5}
