"""``ChatRequest.tool_choice`` in each vendor's words, and its validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_failover.providers import anthropic, gemini, openai
from agent_failover.resilience.models import ChatRequest, Message, ToolSpec
from tests.providers.wire import endpoint

TOOLS = [ToolSpec(name="lookup", description="find a record"), ToolSpec(name="refund")]


def _req(choice: str | None) -> ChatRequest:
    return ChatRequest(
        messages=[Message(role="user", content="hi")], tools=TOOLS, tool_choice=choice
    )


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("refund", {"type": "function", "function": {"name": "refund"}}),
    ],
)
def test_openai_tool_choice(choice: str, expected: object) -> None:
    body = openai.build_body(endpoint("openai-us"), _req(choice), stream=False)
    assert body["tool_choice"] == expected


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ("refund", {"type": "tool", "name": "refund"}),
    ],
)
def test_anthropic_tool_choice(choice: str, expected: object) -> None:
    body = anthropic.build_body(endpoint("anthropic-us-east"), _req(choice), stream=False)
    assert body["tool_choice"] == expected


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ("refund", {"mode": "ANY", "allowedFunctionNames": ["refund"]}),
    ],
)
def test_gemini_tool_choice(choice: str, expected: object) -> None:
    body = gemini.build_body(endpoint("gemini-flash"), _req(choice))
    assert body["toolConfig"] == {"functionCallingConfig": expected}


def test_no_choice_sends_none() -> None:
    """Without a choice every vendor decides (its default is auto)."""
    assert "tool_choice" not in openai.build_body(endpoint("openai-us"), _req(None), stream=False)
    assert "toolConfig" not in gemini.build_body(endpoint("gemini-flash"), _req(None))


def test_unknown_tool_name_is_rejected_naming_the_tools() -> None:
    with pytest.raises(ValidationError, match="tool_choice 'delete'"):
        _req("delete")
