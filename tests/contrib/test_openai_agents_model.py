"""FailoverRunner / FailoverModel map the Agents SDK's items, tools and handoffs to one
ChatRequest and the AgentOutput back, faithfully or with an error naming the item (no server:
``complete`` is a scripted fake)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("agents", reason="extra [openai-agents] not installed")

from agents import Agent, ModelSettings, WebSearchTool, function_tool
from agents.exceptions import UserError
from agents.models.interface import ModelTracing
from pydantic import BaseModel

from agent_failover.contrib.openai_agents import (
    FailoverModel,
    FailoverRunner,
    UnsupportedInputItem,
    failover_outputs,
)
from tests.contrib.test_pydantic_ai_model import ScriptedComplete


@function_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"rain in {city}"


@function_tool
def get_local_time(city: str) -> str:
    """Local time offset."""
    return "UTC+2"


def _agents() -> Agent:
    weather = Agent(
        name="weather", model="weather", instructions="Weather desk.",
        tools=[get_weather, get_local_time],
    )  # fmt: skip
    return Agent(name="triage", model="triage", instructions="Route.", handoffs=[weather])


async def test_handoff_then_two_tools_keep_ids_roles_and_contracts() -> None:
    """triage hands off; weather calls both tools; call ids round-trip; each call's role is its
    agent's model string; the contracts come back in order."""
    complete = ScriptedComplete()
    roles: list[str] = []

    async def recording(role: str, request: object, options: object) -> object:
        roles.append(role)
        return await complete(role, request, options)  # type: ignore[arg-type]

    result = await FailoverRunner(complete=recording).run(_agents(), "weather in Lyon?")
    assert result.final_output == "done" and result.last_agent.name == "weather"
    assert roles == ["triage", "weather", "weather", "weather"]
    first, last = complete.requests[0], complete.requests[-1]
    assert first.system == "Route." and [t.name for t in first.tools] == ["transfer_to_weather"]
    assert last.system == "Weather desk."
    assert [(m.role, m.tool_name, m.tool_call_id) for m in last.messages] == [
        ("user", None, None),
        ("assistant", None, None),
        ("tool", "transfer_to_weather", "call-transfer_to_weather"),
        ("assistant", None, None),
        ("tool", "get_weather", "call-get_weather"),
        ("assistant", None, None),
        ("tool", "get_local_time", "call-get_local_time"),
    ]
    assert last.messages[4].content == "rain in Lyon"
    assert last.messages[3].tool_calls[0].arguments == {"city": "Lyon"}
    outs = failover_outputs(result)
    assert [(o.route, o.tier) for o in outs] == [("gpt-us", 1)] * 3 + [("mini", 2)]
    assert result.raw_responses[0].usage.input_tokens == 11


async def test_structured_output_is_sent_as_json_schema() -> None:
    """A non-text output type becomes json_schema and the JSON answer is parsed by the SDK."""

    class Forecast(BaseModel):
        city: str
        celsius: int

    complete = ScriptedComplete(answer=json.dumps({"city": "Lyon", "celsius": 14}))
    agent = Agent(name="w", model="weather", output_type=Forecast)
    result = await FailoverRunner(complete=complete).run(agent, "?")
    assert result.final_output == Forecast(city="Lyon", celsius=14)
    assert complete.requests[0].json_schema["required"] == ["city", "celsius"]  # type: ignore[index]


async def _call(model: FailoverModel, input: object, **kw: object) -> object:
    return await model.get_response(
        kw.get("system"), input, kw.get("settings", ModelSettings()),  # type: ignore[arg-type]
        kw.get("tools", []), None, [], ModelTracing.DISABLED,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_multipart_text_joins_and_images_are_refused_by_name() -> None:
    """input_text parts join with newlines; an input_image part is an error naming it."""
    complete = ScriptedComplete()
    model = FailoverModel("weather", complete=complete)
    parts = [{"type": "input_text", "text": "one"}, {"type": "input_text", "text": "two"}]
    await _call(model, [{"role": "user", "content": parts}])
    assert complete.requests[0].messages[0].content == "one\ntwo"
    image = {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"}
    with pytest.raises(UnsupportedInputItem, match="image_url"):
        await _call(model, [{"role": "user", "content": [image]}])


async def test_hosted_tools_and_unknown_tool_choice_are_refused() -> None:
    """A hosted tool is named in the error; a tool_choice naming no offered tool is refused."""
    model = FailoverModel("weather", complete=ScriptedComplete())
    with pytest.raises(UnsupportedInputItem, match="WebSearchTool"):
        await _call(model, "hi", tools=[WebSearchTool()])
    with pytest.raises(UnsupportedInputItem, match="nope"):
        await _call(model, "hi", tools=[get_weather], settings=ModelSettings(tool_choice="nope"))
    complete = ScriptedComplete()
    named = FailoverModel("weather", complete=complete)
    await _call(named, "hi", tools=[get_weather], settings=ModelSettings(tool_choice="get_weather"))
    assert complete.requests[0].tool_choice == "get_weather"


async def test_unknown_input_item_is_an_error_naming_it() -> None:
    """An item type the SDK's converter cannot represent fails; nothing is sent."""
    complete = ScriptedComplete()
    with pytest.raises(UnsupportedInputItem, match="item_reference, which is not supported"):
        await _call(
            FailoverModel("weather", complete=complete),
            [{"type": "item_reference", "id": "msg_1"}],
        )
    assert complete.requests == []


async def test_refusal_and_stream_from_the_completed_answer() -> None:
    """A refusal is a refusal content part; streaming yields one response.completed event."""
    refused = await _call(FailoverModel("w", complete=ScriptedComplete(refusal="no")), "hi")
    assert refused.output[0].content[0].refusal == "no"  # type: ignore[attr-defined]
    model = FailoverModel("w", complete=ScriptedComplete(answer="streamed"))
    events = [
        e async for e in model.stream_response(
            None, "hi", ModelSettings(), [], None, [], ModelTracing.DISABLED,
        )
    ]  # fmt: skip
    assert [e.type for e in events] == ["response.completed"]
    assert events[0].response.output[0].content[0].text == "streamed"  # type: ignore[union-attr]


async def test_runner_refuses_model_instances_and_model_less_agents() -> None:
    """An agent holding another Model instance is refused by name; no role and no default
    role is refused; outside a workflow the default complete says where it runs."""
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    other = OpenAIChatCompletionsModel("gpt", openai_client=AsyncOpenAI(api_key="x"))
    with pytest.raises(UserError, match="'odd' has a OpenAIChatCompletionsModel"):
        await FailoverRunner(complete=ScriptedComplete()).run(Agent(name="odd", model=other), "?")
    with pytest.raises(UserError, match="no model"):
        await FailoverRunner(complete=ScriptedComplete()).run(Agent(name="anon"), "?")
    result = await FailoverRunner("weather", complete=ScriptedComplete()).run(
        Agent(name="anon"), "?"
    )
    assert failover_outputs(result)[0].role == "weather"
    with pytest.raises(UserError, match="Temporal workflow code only"):
        await FailoverRunner().run(Agent(name="x", model="weather"), "?")
