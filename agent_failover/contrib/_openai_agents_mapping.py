"""OpenAI Agents SDK input items and tools ↔ agent-failover's ``ChatRequest`` / ``AgentOutput``.

Pure functions, no IO and no Temporal. Input items (the Responses format the SDK speaks)
are first put in Chat Completions shape by the SDK's own converter
(``Converter.items_to_messages``, strict: an item it cannot represent is an error), then
mapped onto our turns:

* the agent's instructions, then ``system``/``developer`` items, become ``system``; user
  items become user turns, multi-part content its text parts joined by newlines; a
  non-text part (image, audio, file) raises :class:`UnsupportedInputItem` naming it;
* assistant messages keep their text and function calls (``call_id`` as the id); a
  refusal is sent as the assistant's text; ``function_call_output`` items become ``tool``
  turns with the ``call_id`` and the name of the call they answer;
* function tools and handoffs become ``ToolSpec`` s (a handoff is the tool the SDK
  offers, ``transfer_to_<agent>``); a hosted tool (web search, file search, computer,
  ...) raises, naming it; ``tool_choice`` auto/required/none/a name keeps its meaning;
  a non-text output type becomes ``json_schema`` (validated per attempt).

:func:`to_model_response` turns the answer back into the SDK's ``ModelResponse`` (text,
refusal, function calls with their ids, usage) carrying the contract as ``.failover``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agents import FunctionTool, Handoff, ModelSettings, Tool, Usage
from agents.agent_output import AgentOutputSchemaBase
from agents.exceptions import UserError
from agents.items import ModelResponse, TResponseInputItem
from agents.models.chatcmpl_converter import Converter
from agents.models.fake_id import FAKE_RESPONSES_ID
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass

from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message, ToolCall, ToolSpec


class UnsupportedInputItem(UserError):
    """An input item, content part or tool agent-failover cannot carry (named in the message)."""


@pydantic_dataclass
class FailoverModelResponse(ModelResponse):
    """The SDK's ``ModelResponse`` plus the degradation contract of the answer (``failover``)."""

    failover: AgentOutput | None = None


def to_chat_request(
    system_instructions: str | None,
    input: str | list[TResponseInputItem],
    settings: ModelSettings,
    tools: list[Tool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff[Any, Any]],
) -> ChatRequest:
    """The ``ChatRequest`` for one Agents SDK model call (see the module docstring)."""
    try:
        chat = Converter.items_to_messages(input, strict_feature_validation=True)
    except UserError as exc:
        raise UnsupportedInputItem(f"input item not supported: {exc}") from exc
    system = [system_instructions] if system_instructions else []
    turns = _turns(chat, system)
    if not turns:
        raise UnsupportedInputItem("the input has no user, assistant or tool turn to send")
    specs = [_tool_spec(t) for t in tools] + [_handoff_spec(h) for h in handoffs]
    extra: dict[str, Any] = {}
    if settings.max_tokens is not None:
        extra["max_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        extra["temperature"] = settings.temperature
    schema = None
    if output_schema is not None and not output_schema.is_plain_text():
        schema = output_schema.json_schema()
    return ChatRequest(
        system="\n\n".join(system) or None,
        messages=turns,
        json_schema=schema,
        tools=specs,
        tool_choice=_tool_choice(settings.tool_choice, specs),
        **extra,
    )


def _turns(chat: Iterable[dict[str, Any]], system: list[str]) -> list[Message]:
    turns: list[Message] = []
    names: dict[str, str] = {}  # call id -> tool name, for tool results
    for index, msg in enumerate(chat):
        role = msg.get("role")
        if role in ("system", "developer"):
            system.append(_text(msg.get("content"), index, role))
        elif role == "user":
            turns.append(Message(role="user", content=_text(msg.get("content"), index, role)))
        elif role == "assistant":
            turns.append(_assistant(msg, index, names))
        elif role == "tool":
            call_id = str(msg.get("tool_call_id"))
            content = _text(msg.get("content"), index, role)
            name = names.get(call_id)
            turns.append(
                Message(role="tool", content=content, tool_call_id=call_id, tool_name=name)
            )
        else:
            raise UnsupportedInputItem(f"item {index}: role {role!r} is not supported")
    return turns


def _assistant(msg: dict[str, Any], index: int, names: dict[str, str]) -> Message:
    text = _text(msg.get("content"), index, "assistant") if msg.get("content") else ""
    if msg.get("refusal"):
        text = (text + "\n" + str(msg["refusal"])).strip()
    calls = []
    for call in msg.get("tool_calls") or []:
        if call.get("type") != "function":
            raise UnsupportedInputItem(
                f"item {index}: {call.get('type')!r} tool call not supported"
            )
        fn = call["function"]
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError as exc:
            raise UnsupportedInputItem(
                f"item {index}: arguments of call {call['id']} ({fn['name']}) are not JSON"
            ) from exc
        names[call["id"]] = fn["name"]
        calls.append(ToolCall(id=call["id"], name=fn["name"], arguments=args))
    return Message(role="assistant", content=text, tool_calls=calls)


def _text(content: Any, index: int, role: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        if kind in ("text", "input_text", "output_text"):
            texts.append(str(part["text"]))
        elif kind == "refusal":
            texts.append(str(part["refusal"]))
        else:
            raise UnsupportedInputItem(
                f"item {index} ({role}): content part {kind!r} is not supported "
                "(agent-failover sends text only)"
            )
    return "\n".join(texts)


def _tool_spec(tool: Tool) -> ToolSpec:
    if not isinstance(tool, FunctionTool):
        raise UnsupportedInputItem(
            f"tool {getattr(tool, 'name', '?')!r} ({type(tool).__name__}) is a hosted tool; "
            "agent-failover offers function tools and handoffs only"
        )
    return ToolSpec(
        name=tool.name, description=tool.description, parameters=tool.params_json_schema
    )


def _handoff_spec(handoff: Handoff[Any, Any]) -> ToolSpec:
    return ToolSpec(
        name=handoff.tool_name,
        description=handoff.tool_description,
        parameters=handoff.input_json_schema,
    )


def _tool_choice(choice: Any, specs: list[ToolSpec]) -> str | None:
    if not specs or choice is None:
        return None
    if isinstance(choice, str):
        if choice in ("auto", "required", "none") or choice in {s.name for s in specs}:
            return choice
        raise UnsupportedInputItem(f"tool_choice {choice!r} names no offered tool or handoff")
    raise UnsupportedInputItem(f"tool_choice {choice!r} is not supported (MCP tool choice)")


def to_model_response(out: AgentOutput) -> FailoverModelResponse:
    """The SDK's response for ``out``: message (text or refusal), function calls, usage."""
    output: list[ResponseOutputItem] = []
    content: list[Any] = []
    if out.refusal is not None:
        content.append(ResponseOutputRefusal(refusal=out.refusal, type="refusal"))
    elif out.content:
        content.append(ResponseOutputText(text=out.content, type="output_text", annotations=[]))
    if content:
        output.append(
            ResponseOutputMessage(
                id=FAKE_RESPONSES_ID,
                content=content,
                role="assistant",
                status="completed",
                type="message",
            )
        )
    if out.refusal is None:
        output += [
            ResponseFunctionToolCall(
                id=FAKE_RESPONSES_ID,
                call_id=call.id,
                name=call.name,
                arguments=json.dumps(call.arguments),
                type="function_call",
                status="completed",
            )
            for call in out.tool_calls
        ]
    usage = Usage(
        requests=1,
        input_tokens=out.usage.input_tokens,
        output_tokens=out.usage.output_tokens,
        total_tokens=out.usage.input_tokens + out.usage.output_tokens,
    )
    return FailoverModelResponse(output=output, usage=usage, response_id=None, failover=out)
