"""Reasoning state carried from a reply to the next request, per wire, and dropped elsewhere.

Written from the vendors' references:

* Gemini thought signatures (https://ai.google.dev/gemini-api/docs/thought-signatures):
  Gemini 3 returns ``thoughtSignature`` on the ``functionCall`` part; the part must go
  back with it in the next request (only the first of parallel calls carries one), else
  400 "Function call is missing a thought_signature". A call made by another model has
  none, for which the page documents ``skip_thought_signature_validator``.
* Anthropic extended thinking with tool use
  (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks):
  the ``thinking`` blocks, with their ``signature``, go back unchanged in the assistant
  turn that used tools; streamed as ``thinking_delta`` and ``signature_delta``.
* DeepSeek thinking mode with tool calls
  (https://api-docs.deepseek.com/guides/thinking_mode): ``reasoning_content`` is not the
  answer, and goes back on the assistant message that made tool calls.
"""

from __future__ import annotations

import json

import httpx

from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.resilience.models import (
    ChatRequest,
    Message,
    Reasoning,
    ToolCall,
    ToolSpec,
)
from tests.providers.wire import anthropic_json, endpoint, gemini_json, sse, stream_response

BUDGETS = Budgets(total_s=5, trailer_grace_s=0.05)
GEMINI3 = endpoint("gemini-flash", model="gemini-3-pro-preview")
GEMINI25 = endpoint("gemini-flash")
CLAUDE = endpoint("anthropic-us-east")
DEEPSEEK = endpoint("cheap-mini", model="deepseek-reasoner")
TOOL = ToolSpec(name="get_weather", parameters={"type": "object", "properties": {}})
SIG = "CiQBjz1rX8kAbC/EnCrYpTEd+signature=="


def first_turn() -> list[Message]:
    return [Message(role="user", content="Weather in Paris and London?")]


async def run(mock_client, ep, payload_or_response, messages, *, stream=False):
    """One call; the reply and the JSON body that was sent."""
    response = (
        payload_or_response
        if isinstance(payload_or_response, httpx.Response)
        else httpx.Response(200, json=payload_or_response)
    )
    client, rec = mock_client(lambda _: response)
    request = ChatRequest(messages=messages, tools=[TOOL], stream=stream)
    async with client:
        reply = await complete(client, ep, request, BUDGETS)
    return reply, json.loads(rec.requests[0].content)


def follow_up(reply) -> list[Message]:
    """The conversation after ``reply``: its assistant turn, then the tool results."""
    return [
        *first_turn(),
        Message(
            role="assistant",
            content=reply.text,
            tool_calls=reply.tool_calls,
            reasoning=reply.reasoning,
        ),
        *[
            Message(role="tool", tool_call_id=c.id, tool_name=c.name, content='{"t": 20}')
            for c in reply.tool_calls
        ],
    ]


# -- Gemini ---------------------------------------------------------------------------------


GEMINI_PARALLEL = [
    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": SIG},
    {"functionCall": {"name": "get_weather", "args": {"city": "London"}}},
]


async def test_gemini3_signature_goes_back_on_its_function_call(mock_client):
    """The second tool turn sends each functionCall part with the signature it came with."""
    reply, _ = await run(mock_client, GEMINI3, gemini_json("", parts=GEMINI_PARALLEL), first_turn())
    assert reply.tool_calls[0].reasoning is not None
    assert reply.tool_calls[0].reasoning.signature == SIG
    _, body = await run(mock_client, GEMINI3, gemini_json("done"), follow_up(reply))
    model_turn = body["contents"][1]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0]["thoughtSignature"] == SIG
    assert "thoughtSignature" not in model_turn["parts"][1]  # parallel: only the first has one


async def test_gemini3_signature_in_a_stream(mock_client):
    """A streamed functionCall part's signature is kept the same way."""
    chunk = {
        "candidates": [
            {"content": {"role": "model", "parts": GEMINI_PARALLEL[:1]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
    }
    reply, _ = await run(
        mock_client, GEMINI3, stream_response([sse(None, chunk)]), first_turn(), stream=True
    )
    assert reply.tool_calls[0].reasoning.signature == SIG


async def test_foreign_call_into_gemini3_gets_the_documented_stand_in(mock_client):
    """A conversation failing over from Claude into Gemini 3: Claude's calls have no
    Gemini signature, so the first call of the turn carries the documented stand-in,
    never a signature from elsewhere."""
    foreign = Reasoning(origin="anthropic:claude-sonnet-4-5", signature="not-gemini")
    calls = [ToolCall(id="toolu_1", name="get_weather", arguments={}, reasoning=foreign)]
    messages = [
        *first_turn(),
        Message(role="assistant", tool_calls=calls),
        Message(role="tool", tool_call_id="toolu_1", content="{}"),
    ]
    _, body = await run(mock_client, GEMINI3, gemini_json("ok"), messages)
    assert body["contents"][1]["parts"][0]["thoughtSignature"] == "skip_thought_signature_validator"
    _, body = await run(mock_client, GEMINI25, gemini_json("ok"), messages)
    assert "thoughtSignature" not in body["contents"][1]["parts"][0]


# -- Anthropic ------------------------------------------------------------------------------


THINKING = {"type": "thinking", "thinking": "Two cities: call twice.", "signature": "EqQBCgIYAh=="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}


async def test_anthropic_thinking_blocks_go_back_with_the_tool_results(mock_client):
    """The assistant turn that used tools starts with its thinking blocks, unchanged."""
    blocks = [
        THINKING,
        REDACTED,
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ]
    reply, _ = await run(
        mock_client, CLAUDE, anthropic_json("", stop="tool_use", blocks=blocks), first_turn()
    )
    assert reply.text == "" and reply.reasoning is not None
    _, body = await run(mock_client, CLAUDE, anthropic_json("Sunny."), follow_up(reply))
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][:2] == [THINKING, REDACTED]
    assert assistant["content"][2]["type"] == "tool_use"


async def test_anthropic_streamed_thinking_is_assembled(mock_client):
    """``thinking_delta`` and ``signature_delta`` events add up to the block sent back."""

    def ev(kind: str, **fields) -> bytes:
        return sse(kind, {"type": kind, **fields})

    def delta(index: int, **d) -> bytes:
        return ev("content_block_delta", index=index, delta=d)

    tool = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    events = [
        ev("message_start", message={"model": "c", "usage": {"input_tokens": 5}}),
        ev("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        delta(0, type="thinking_delta", thinking="Two cities: "),
        delta(0, type="thinking_delta", thinking="call twice."),
        delta(0, type="signature_delta", signature="EqQBCgIYAh=="),
        ev("content_block_stop", index=0),
        ev("content_block_start", index=1, content_block=tool),
        delta(1, type="input_json_delta", partial_json="{}"),
        ev("content_block_stop", index=1),
        ev("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 9}),
        ev("message_stop"),
    ]
    reply, _ = await run(mock_client, CLAUDE, stream_response(events), first_turn(), stream=True)
    assert reply.reasoning is not None and reply.reasoning.blocks == [THINKING]


async def test_anthropic_drops_another_wires_reasoning(mock_client):
    """Reasoning from another wire (or model) is never sent to Anthropic."""
    foreign = Reasoning(origin="gemini:gemini-3-pro-preview", blocks=[THINKING])
    messages = [
        *first_turn(),
        Message(
            role="assistant",
            tool_calls=[ToolCall(id="c1", name="get_weather")],
            reasoning=foreign,
        ),
        Message(role="tool", tool_call_id="c1", content="{}"),
    ]
    _, body = await run(mock_client, CLAUDE, anthropic_json("ok"), messages)
    assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use"]


# -- OpenAI-compatible ----------------------------------------------------------------------


def deepseek_reply() -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "deepseek-reasoner",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "reasoning_content": "I should look the weather up.",
                    "tool_calls": [
                        {
                            "id": "call_0",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": "{}"},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


async def test_reasoning_content_goes_back_in_the_tool_loop(mock_client):
    """``reasoning_content`` is not the answer and goes back on the tool-call turn."""
    reply, _ = await run(mock_client, DEEPSEEK, deepseek_reply(), first_turn())
    assert reply.text == "" and reply.reasoning.text == "I should look the weather up."
    _, body = await run(mock_client, DEEPSEEK, deepseek_reply(), follow_up(reply))
    assert body["messages"][1]["reasoning_content"] == "I should look the weather up."
    # The same conversation sent to another model drops it.
    _, body = await run(mock_client, endpoint("cheap-mini"), deepseek_reply(), follow_up(reply))
    assert "reasoning_content" not in body["messages"][1]


async def test_streamed_reasoning_content(mock_client):
    """Streamed ``delta.reasoning_content`` is gathered, not added to the text."""
    chunks = [
        {"choices": [{"index": 0, "delta": {"reasoning_content": "Think "}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "more."}}]},
        {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]},
    ]
    body = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
    reply, _ = await run(mock_client, DEEPSEEK, stream_response(body), first_turn(), stream=True)
    assert reply.text == "Hi" and reply.reasoning.text == "Think more."


async def test_missing_signature_400_fails_over(mock_client):
    """Gemini 3's 400 "Function call is missing a thought_signature" is about this model,
    not the request: another route can serve it (https://ai.google.dev/gemini-api/docs/thought-signatures)."""
    from agent_failover.resilience import errors as E

    body = {
        "error": {
            "code": 400,
            "message": "Function call is missing a thought_signature in functionCall parts. "
            "This is required for tools to work correctly.",
            "status": "INVALID_ARGUMENT",
        }
    }
    client, _ = mock_client(lambda _: httpx.Response(400, json=body))
    request = ChatRequest(messages=first_turn(), stream=False)
    async with client:
        try:
            await complete(client, GEMINI3, request, BUDGETS)
        except E.InvalidRequestError as err:
            assert err.decision is E.Decision.FAILOVER
        else:
            raise AssertionError("a 400 must raise")


# -- Bedrock Converse -------------------------------------------------------------------------

BEDROCK = endpoint("bedrock-us-west-2")
REASONING_BLOCK = {
    "reasoningContent": {"reasoningText": {"text": "Call the tool.", "signature": "EqoBCkgIARAB"}}
}


async def test_bedrock_reasoning_blocks_go_back_first(mock_client):
    """Converse ``reasoningContent`` (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ReasoningContentBlock.html)
    is not the answer and goes back first in the assistant turn that used tools
    (https://docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-extended-thinking.html)."""
    from tests.providers.wire import bedrock_json

    blocks = [
        REASONING_BLOCK,
        {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {}}},
    ]
    reply, _ = await run(
        mock_client, BEDROCK, bedrock_json("", stop="tool_use", blocks=blocks), first_turn()
    )
    assert reply.text == "" and reply.reasoning.blocks == [REASONING_BLOCK]
    _, body = await run(mock_client, BEDROCK, bedrock_json("Sunny."), follow_up(reply))
    assert body["messages"][1]["content"][0] == REASONING_BLOCK
    assert "toolUse" in body["messages"][1]["content"][1]


async def test_bedrock_streamed_reasoning_is_assembled(mock_client):
    """``contentBlockDelta`` ``reasoningContent`` text and signature add up to one block."""
    from agent_failover.testing.sim.wire import eventstream as es

    def thought(**part) -> bytes:
        delta = {"contentBlockIndex": 0, "delta": {"reasoningContent": part}}
        return es.event("contentBlockDelta", delta)

    frames = [
        es.event("messageStart", {"role": "assistant"}),
        thought(text="Call "),
        thought(text="the tool."),
        thought(signature="EqoBCkgIARAB"),
        es.event("contentBlockStop", {"contentBlockIndex": 0}),
        es.event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "ok"}}),
        es.event("messageStop", {"stopReason": "end_turn"}),
        es.event("metadata", {"usage": {"inputTokens": 3, "outputTokens": 2}, "metrics": {}}),
    ]
    response = httpx.Response(
        200,
        headers={"content-type": "application/vnd.amazon.eventstream"},
        content=b"".join(frames),
    )
    reply, _ = await run(mock_client, BEDROCK, response, first_turn(), stream=True)
    assert reply.text == "ok" and reply.reasoning.blocks == [REASONING_BLOCK]
