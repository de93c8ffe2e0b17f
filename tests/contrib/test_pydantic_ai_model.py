"""FailoverModel maps PydanticAI's messages to one ChatRequest and the AgentOutput back,
faithfully or with an error naming the part (no server: ``complete`` is a scripted fake)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pydantic_ai", reason="extra [pydantic-ai] not installed")

from pydantic import BaseModel
from pydantic_ai import Agent, ImageUrl, TextContent
from pydantic_ai.exceptions import ContentFilterError, UserError
from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    FilePart,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.output import PromptedOutput
from pydantic_ai.tools import ToolDefinition

from agent_failover import AgentOutput, Capability, ChatRequest, FinishReason, ToolCall, Usage
from agent_failover.contrib._pydantic_ai_mapping import to_chat_request
from agent_failover.contrib.pydantic_ai import (
    FailoverModel,
    FailoverTemporalAgent,
    UnsupportedMessagePart,
    failover_outputs,
)


class ScriptedComplete:
    """Calls each offered tool once (ids ``call-<name>``), then answers; records requests."""

    def __init__(self, answer: str = "done", refusal: str | None = None) -> None:
        self.requests: list[ChatRequest] = []
        self.answer, self.refusal = answer, refusal

    async def __call__(self, role: str, request: ChatRequest, options: object) -> AgentOutput:
        self.requests.append(request)
        called = {c.name for m in request.messages for c in m.tool_calls}
        pending = [
            t for t in request.tools if t.name not in called and request.tool_choice != "none"
        ]
        base = dict(role=role, confidence=0.95, usage=Usage(input_tokens=11, output_tokens=7))
        if pending:
            call = ToolCall(
                id=f"call-{pending[0].name}", name=pending[0].name, arguments={"city": "Lyon"}
            )
            return AgentOutput(
                content="", capability=Capability.FULL, tier=1, route="gpt-us", model="gpt-4.1",
                tool_calls=[call], finish_reason=FinishReason.TOOL_CALLS, **base,
            )  # fmt: skip
        return AgentOutput(
            content=self.answer, capability=Capability.DEGRADED, tier=2, route="mini",
            model="mistral-small", finish_reason=FinishReason.STOP, refusal=self.refusal, **base,
        )  # fmt: skip


def _agent(complete: ScriptedComplete, **kwargs: object) -> Agent:
    agent = Agent(FailoverModel("weather", complete=complete), name="weather", **kwargs)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"rain in {city}"

    @agent.tool_plain
    def get_local_time(city: str) -> str:
        """Local time offset."""
        return "UTC+2"

    return agent


async def test_agent_loop_keeps_tool_ids_instructions_usage_and_contract() -> None:
    """Two tool calls then text: ids round-trip, returns are tool turns, the contract rides on."""
    complete = ScriptedComplete()
    agent = _agent(complete, instructions="Answer briefly.", system_prompt="You are a forecaster.")
    result = await agent.run("weather in Lyon?")
    assert result.output == "done"
    last = complete.requests[-1]
    assert last.system == "You are a forecaster.\n\nAnswer briefly."
    assert [(m.role, m.tool_call_id, m.tool_name) for m in last.messages] == [
        ("user", None, None),
        ("assistant", None, None),
        ("tool", "call-get_weather", "get_weather"),
        ("assistant", None, None),
        ("tool", "call-get_local_time", "get_local_time"),
    ]
    assert last.messages[1].tool_calls[0].id == "call-get_weather"
    assert last.messages[2].content == "rain in Lyon"
    assert [t.name for t in last.tools] == ["get_weather", "get_local_time"]
    assert last.tools[0].description == "Current weather for a city."
    assert last.tool_choice == "auto"
    responses = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    assert [r.model_name for r in responses] == ["gpt-4.1", "gpt-4.1", "mistral-small"]
    assert [r.finish_reason for r in responses] == ["tool_call", "tool_call", "stop"]
    assert responses[0].usage.input_tokens == 11 and responses[0].usage.output_tokens == 7
    call = responses[0].parts[0]
    assert isinstance(call, ToolCallPart) and call.tool_call_id == "call-get_weather"
    outs = failover_outputs(result)
    assert [(o.route, o.tier, o.capability) for o in outs] == [
        ("gpt-us", 1, Capability.FULL),
        ("gpt-us", 1, Capability.FULL),
        ("mini", 2, Capability.DEGRADED),
    ]
    assert failover_outputs(result.all_messages()) == outs


async def test_multipart_user_content_text_joined_cache_point_skipped() -> None:
    """Text parts (str, TextContent) join with newlines; a CachePoint is a marker, not text."""
    complete = ScriptedComplete()
    await Agent(FailoverModel("weather", complete=complete)).run(
        ["first line", TextContent("second line"), CachePoint()]
    )
    assert complete.requests[0].messages[0].content == "first line\nsecond line"


@pytest.mark.parametrize(
    "item,name",
    [
        (ImageUrl("https://example.com/a.png"), "ImageUrl"),
        (BinaryContent(b"\x00", media_type="application/octet-stream"), "BinaryContent"),
    ],
)
async def test_non_text_user_content_is_an_error_naming_it(item: object, name: str) -> None:
    """Images or binary parts cannot travel as text: the error names the part, nothing is sent."""
    complete = ScriptedComplete()
    with pytest.raises(UnsupportedMessagePart, match=name):
        await Agent(FailoverModel("weather", complete=complete)).run(["look:", item])
    assert complete.requests == []


async def test_unknown_response_part_in_history_is_an_error_naming_it() -> None:
    """A history holding a part we cannot send (a generated file) fails with its name."""
    history = [
        ModelRequest(parts=[UserPromptPart("draw")]),
        ModelResponse(parts=[FilePart(BinaryContent(b"png", media_type="image/png"))]),
    ]
    complete = ScriptedComplete()
    with pytest.raises(UnsupportedMessagePart, match="FilePart"):
        await Agent(FailoverModel("weather", complete=complete)).run(
            "again", message_history=history
        )


async def test_native_structured_output_becomes_json_schema() -> None:
    """An output type is sent as json_schema (validated per attempt) and parsed back."""

    class Forecast(BaseModel):
        city: str
        celsius: int

    complete = ScriptedComplete(answer=json.dumps({"city": "Lyon", "celsius": 14}))
    result = await Agent(FailoverModel("weather", complete=complete), output_type=Forecast).run("?")
    assert result.output == Forecast(city="Lyon", celsius=14)
    schema = complete.requests[0].json_schema
    assert schema is not None and schema["required"] == ["city", "celsius"]


async def test_prompted_output_instructions_join_the_system_prompt() -> None:
    """PromptedOutput's instructions are part of the system prompt; no json_schema is sent."""

    class Answer(BaseModel):
        text: str

    complete = ScriptedComplete(answer=json.dumps({"text": "hi"}))
    agent = Agent(FailoverModel("weather", complete=complete), output_type=PromptedOutput(Answer))
    assert (await agent.run("?")).output == Answer(text="hi")
    request = complete.requests[0]
    assert request.json_schema is None and request.system and "text" in request.system


@pytest.mark.parametrize(
    "choice,sent_tools,sent_choice",
    [
        (None, ["a", "b"], "auto"),
        ("none", ["a", "b"], "none"),
        ("required", ["a", "b"], "required"),
        (["b"], ["b"], "b"),
        (["a", "b"], ["a", "b"], "required"),
    ],
)
def test_tool_choice_keeps_its_meaning(
    choice: object, sent_tools: list[str], sent_choice: str
) -> None:
    """auto / none / required / one named tool map to ours; a subset narrows the tools sent."""
    tools = [ToolDefinition(name=n, parameters_json_schema={"type": "object"}) for n in "ab"]
    params = ModelRequestParameters(function_tools=tools, allow_text_output=True)
    settings = None if choice is None else {"tool_choice": choice}
    request = to_chat_request([ModelRequest(parts=[UserPromptPart("?")])], settings, params)
    assert [t.name for t in request.tools] == sent_tools and request.tool_choice == sent_choice


async def test_refusal_is_a_content_filter_error_with_the_providers_message() -> None:
    """A refusal comes back as finish reason content_filter: PydanticAI raises with the text."""
    complete = ScriptedComplete(refusal="I can't help with that.")
    with pytest.raises(ContentFilterError, match="I can't help with that"):
        await Agent(FailoverModel("weather", complete=complete)).run("?")


async def test_stream_is_the_completed_answer_as_one_event_stream() -> None:
    """run_stream works: the stream replays the finished answer (same text, one request)."""
    complete = ScriptedComplete(answer="streamed answer")
    agent = Agent(FailoverModel("weather", complete=complete))
    async with agent.run_stream("?") as stream:
        chunks = [c async for c in stream.stream_text(delta=True)]
    assert "".join(chunks) == "streamed answer" and len(complete.requests) == 1


async def test_tool_file_becomes_pydantics_note_and_raw_files_are_refused() -> None:
    """Through an Agent, PydanticAI replaces a tool's image with a note (we declare text only);
    handed raw to the mapping, a tool result with files is an error naming the tool."""
    history = [
        ModelRequest(parts=[UserPromptPart("chart?")]),
        ModelResponse(parts=[ToolCallPart("chart", {}, tool_call_id="c1")]),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    "chart", [BinaryContent(b"png", media_type="image/png")], tool_call_id="c1"
                )
            ]
        ),
        ModelResponse(parts=[TextPart("here")]),
    ]
    complete = ScriptedComplete()
    await Agent(FailoverModel("weather", complete=complete)).run("more", message_history=history)
    tool_turn = complete.requests[0].messages[2]
    assert tool_turn.role == "tool" and tool_turn.tool_call_id == "c1"
    assert "was not sent" in tool_turn.content
    with pytest.raises(UnsupportedMessagePart, match="tool 'chart' \\(call c1\\) returned files"):
        to_chat_request(history, None, ModelRequestParameters())


async def test_outside_a_workflow_without_complete_says_where_it_runs() -> None:
    """The default complete is resilient_complete: outside a workflow the error says so."""
    with pytest.raises(UserError, match="Temporal workflow code only"):
        await Agent(FailoverModel("weather")).run("?")


def test_temporal_agent_needs_a_failover_model_and_registers_no_model_activity() -> None:
    """FailoverTemporalAgent refuses other models and models=; it keeps only tool activities."""
    agent = _agent(ScriptedComplete())
    temporal = FailoverTemporalAgent(agent)
    names = sorted(a.__temporal_activity_definition.name for a in temporal.temporal_activities)
    assert not any("model_request" in n for n in names), names
    assert any("call_tool" in n for n in names), names
    with pytest.raises(UserError, match="FailoverModel"):
        FailoverTemporalAgent(Agent("test", name="other"))
    with pytest.raises(UserError, match="run time"):
        FailoverTemporalAgent(_agent(ScriptedComplete()), models={"x": FailoverModel("other")})
