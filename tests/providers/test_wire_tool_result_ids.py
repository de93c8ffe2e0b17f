"""An agent loop's tool results reach each provider tied to the call they answer.

The loop sends ``Message(role="tool", tool_call_id=..., tool_name=...)`` after the
assistant's ``tool_calls``; each adapter must carry that link in its own wire form.
"""

from __future__ import annotations

from agent_failover.providers import anthropic, bedrock, gemini, openai
from agent_failover.resilience.models import ChatRequest, Message, ToolCall, ToolSpec
from tests.providers.wire import endpoint

CALLS = [
    ToolCall(id="call_a1", name="create_ticket", arguments={"title": "db down"}),
    ToolCall(id="call_b2", name="post_message", arguments={"text": "hi"}),
]
REQ = ChatRequest(
    messages=[
        Message(role="user", content="open a ticket and tell #ops"),
        Message(role="assistant", content="", tool_calls=CALLS),
        Message(
            role="tool", tool_call_id="call_a1", tool_name="create_ticket", content='{"id": "T1"}'
        ),
        Message(
            role="tool", tool_call_id="call_b2", tool_name="post_message", content='{"id": "M1"}'
        ),
    ],
    tools=[ToolSpec(name="create_ticket"), ToolSpec(name="post_message")],
    tool_choice="auto",
)


def test_openai_tool_messages_carry_tool_call_id() -> None:
    msgs = openai.build_body(endpoint("openai-us"), REQ, stream=False)["messages"]
    assert [c["id"] for c in msgs[-3]["tool_calls"]] == ["call_a1", "call_b2"]
    assert [(m["role"], m["tool_call_id"]) for m in msgs[-2:]] == [
        ("tool", "call_a1"),
        ("tool", "call_b2"),
    ]


def test_anthropic_tool_results_carry_tool_use_id_in_one_user_turn() -> None:
    msgs = anthropic.build_body(endpoint("anthropic-us-east"), REQ, stream=False)["messages"]
    assert [b["id"] for b in msgs[1]["content"] if b["type"] == "tool_use"] == [
        "call_a1",
        "call_b2",
    ]
    results = msgs[2]["content"]
    assert msgs[2]["role"] == "user" and len(msgs) == 3
    assert [(b["type"], b["tool_use_id"]) for b in results] == [
        ("tool_result", "call_a1"),
        ("tool_result", "call_b2"),
    ]


def test_bedrock_tool_results_carry_tool_use_id() -> None:
    msgs = bedrock.build_body(endpoint("bedrock-us-west-2"), REQ)["messages"]
    uses = [b["toolUse"]["toolUseId"] for b in msgs[1]["content"] if "toolUse" in b]
    results = [b["toolResult"]["toolUseId"] for b in msgs[2]["content"] if "toolResult" in b]
    assert uses == results == ["call_a1", "call_b2"]


def test_gemini_function_responses_follow_the_calls_by_name() -> None:
    """Gemini links a functionResponse to its functionCall by name (and order)."""
    contents = gemini.build_body(endpoint("gemini-flash"), REQ)["contents"]
    calls = [p["functionCall"]["name"] for p in contents[1]["parts"]]
    responses = [p["functionResponse"] for p in contents[2]["parts"]]
    assert calls == [r["name"] for r in responses] == ["create_ticket", "post_message"]
    assert responses[0]["response"] == {"id": "T1"}
