"""Structured output beside the caller's tools, on Anthropic and Bedrock Converse.

Forcing the structured-output tool (``tool_choice: {type: tool}`` /
``toolChoice: {tool}``) makes the model call that tool and nothing else, so with user
tools declared the model could never call them. Written from Anthropic's tool-use guide
("Forcing tool use", https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use#forcing-tool-use)
and Bedrock's ``ToolChoice`` reference
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ToolChoice.html):
with user tools, the JSON tool is offered under ``auto`` and the final answer validated.
"""

from __future__ import annotations

import json

import httpx

from agent_failover.providers import anthropic
from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.providers.validate import validate_reply
from agent_failover.resilience.models import ChatRequest, FinishReason, Message, ToolSpec
from tests.providers.wire import anthropic_json, bedrock_json, endpoint

BUDGETS = Budgets(total_s=5)
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
LOOKUP = ToolSpec(
    name="lookup",
    description="look a number up",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)


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
    reply, body = await _call(mock_client, endpoint("anthropic-us-east"), payload, ask())
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
    reply, _ = await _call(mock_client, endpoint("anthropic-us-east"), payload, ask())
    assert reply.tool_calls == [] and reply.finish_reason is FinishReason.STOP
    assert validate_reply(reply, SCHEMA, endpoint="e") == {"n": 7}


async def test_anthropic_caller_choice_is_kept(mock_client):
    """``required`` stays Anthropic's ``any``; ``none`` (no user tool callable) forces JSON."""
    payload = anthropic_json("", stop="tool_use", blocks=[])
    _, body = await _call(
        mock_client, endpoint("anthropic-us-east"), payload, ask(tool_choice="required")
    )
    assert body["tool_choice"] == {"type": "any"}
    _, body = await _call(
        mock_client, endpoint("anthropic-us-east"), payload, ask(tool_choice="none")
    )
    assert body["tool_choice"] == {"type": "tool", "name": anthropic.JSON_TOOL}


async def test_bedrock_user_tool_can_be_called(mock_client):
    """Converse: ``toolChoice.auto`` beside user tools; the user's toolUse comes back."""
    blocks = [{"toolUse": {"toolUseId": "tooluse_1", "name": "lookup", "input": {"q": "x"}}}]
    payload = bedrock_json("", stop="tool_use", blocks=blocks)
    reply, body = await _call(mock_client, endpoint("bedrock-us-west-2"), payload, ask())
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
    reply, body = await _call(mock_client, endpoint("bedrock-us-west-2"), payload, request)
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": anthropic.JSON_TOOL}}
    assert json.loads(reply.text) == {"n": 1}
