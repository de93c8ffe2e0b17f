"""Output validation: empty, truncated, invalid JSON, schema violations, malformed tool calls."""

from __future__ import annotations

import pytest

from agent_failover.providers.validate import validate_reply
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatReply, FinishReason, Reasoning, ToolCall

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def reply(text: str, finish: FinishReason = FinishReason.STOP, **kw) -> ChatReply:
    """A reply with the given text and finish reason."""
    return ChatReply(text=text, endpoint="ep", model="m", finish_reason=finish, **kw)


def test_plain_text_passes_without_schema():
    """Non-empty text without a schema validates to None."""
    assert validate_reply(reply("hello"), None, endpoint="ep") is None


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_empty_output(text):
    """Empty or whitespace-only text with no tool calls is EmptyOutputError."""
    with pytest.raises(E.EmptyOutputError):
        validate_reply(reply(text), None, endpoint="ep")


def test_tool_calls_only_is_not_empty():
    """A reply that only calls tools is not empty and has no final JSON yet."""
    r = reply("", FinishReason.TOOL_CALLS, tool_calls=[ToolCall(id="1", name="f")])
    assert validate_reply(r, SCHEMA, endpoint="ep") is None


def test_truncated_json():
    """finish_reason LENGTH with a schema is TruncatedOutputError, keeping the partial text."""
    with pytest.raises(E.TruncatedOutputError) as info:
        validate_reply(reply('{"n": 1', FinishReason.LENGTH), SCHEMA, endpoint="ep")
    assert info.value.partial_text == '{"n": 1'


def test_length_without_schema_is_fine():
    """Without a schema a length-capped answer is still an answer."""
    assert validate_reply(reply("long text", FinishReason.LENGTH), None, endpoint="ep") is None


def test_not_json():
    """Text that is not JSON is InvalidOutputError."""
    with pytest.raises(E.InvalidOutputError, match="not JSON"):
        validate_reply(reply("Sure! Here it is"), SCHEMA, endpoint="ep")


def test_schema_violation_names_the_path():
    """JSON that violates the schema is InvalidOutputError naming where."""
    with pytest.raises(E.InvalidOutputError, match="n"):
        validate_reply(reply('{"n": "four"}'), SCHEMA, endpoint="ep")


def test_valid_json_returns_data_and_tolerates_a_fence():
    """Valid JSON (also inside one Markdown fence) returns the parsed data."""
    assert validate_reply(reply('{"n": 4}'), SCHEMA, endpoint="ep") == {"n": 4}
    assert validate_reply(reply('```json\n{"n": 5}\n```'), SCHEMA, endpoint="ep") == {"n": 5}


def test_malformed_tool_call():
    """A tool call whose arguments did not parse is MalformedToolCallError."""
    r = reply(
        "", FinishReason.TOOL_CALLS, tool_calls=[ToolCall(id="1", name="f", raw_arguments="{")]
    )
    with pytest.raises(E.MalformedToolCallError):
        validate_reply(r, None, endpoint="ep")


def test_nameless_tool_call_is_malformed():
    """A tool call without a name is MalformedToolCallError."""
    r = reply("x", tool_calls=[ToolCall(id="1", name="")])
    with pytest.raises(E.MalformedToolCallError):
        validate_reply(r, None, endpoint="ep")


def test_invalid_schema_is_the_callers_bug():
    """An invalid schema raises InvalidRequestError (STOP), not a semantic failure."""
    with pytest.raises(E.InvalidRequestError):
        validate_reply(reply("{}"), {"type": 5}, endpoint="ep")


def test_semantic_errors_are_classified_semantic():
    """Semantic errors feed the semantic-failure rate, not the error rate alone."""
    with pytest.raises(E.SemanticError) as info:
        validate_reply(reply(""), None, endpoint="ep")
    assert info.value.classification.semantic


def test_reasoning_state_counts_toward_max_reply_bytes() -> None:
    """Thinking blocks and signatures go into history with the reply (the next turn sends
    them back), so a short answer whose reasoning state is large is still oversized."""
    blocks = [{"type": "thinking", "thinking": "x" * 5000, "signature": "s" * 500}]
    small = ChatReply(text="ok", model="m", endpoint="ep", finish_reason=FinishReason.STOP)
    assert validate_reply(small, None, endpoint="ep", max_reply_bytes=1000) is None
    thought = small.model_copy(update={"reasoning": Reasoning(origin="anthropic:m", blocks=blocks)})
    with pytest.raises(E.OversizedOutputError, match="above max_reply_bytes 1000"):
        validate_reply(thought, None, endpoint="ep", max_reply_bytes=1000)
    signed = small.model_copy(
        update={
            "tool_calls": [
                ToolCall(
                    id="c1",
                    name="f",
                    arguments={},
                    reasoning=Reasoning(origin="gemini:m", signature="g" * 2000),
                )
            ]
        }
    )
    with pytest.raises(E.OversizedOutputError):
        validate_reply(signed, None, endpoint="ep", max_reply_bytes=1000)
