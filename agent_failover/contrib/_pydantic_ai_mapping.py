"""PydanticAI messages and request parameters ↔ agent-failover's ``ChatRequest`` / ``AgentOutput``.

Pure functions, no IO and no Temporal: :func:`to_chat_request` turns what PydanticAI hands a
model (prepared messages, settings, ``ModelRequestParameters``, the instructions) into one
:class:`ChatRequest`; :func:`to_model_response` turns the :class:`AgentOutput` back into a
``ModelResponse``. The mapping is faithful or it fails:

* system prompts, then instructions, become the request's ``system``; user prompts
  become user turns, multi-part prompts their text parts joined by newlines; a non-text
  part (image, audio, document, video, binary, uploaded file) raises
  :class:`UnsupportedMessagePart` naming it — ``ChatRequest`` carries text only;
* tool returns become ``tool`` turns with their ``tool_call_id`` and ``tool_name`` (a tool
  that returned files raises); assistant text and tool calls (with their ids) become
  assistant turns; thinking parts are not sent (a model's scratchpad is not conversation,
  and PydanticAI's own chat adapters drop other models' thinking the same way); cache
  points are markers, not content;
* function and output tools become ``ToolSpec`` s, ``tool_choice`` keeps its meaning
  (``auto``/``required``/``none``/one tool; a subset narrows the tools sent); native
  structured output becomes ``json_schema`` (validated per attempt, so a schema-violating
  answer fails over); prompted output's instructions join the system prompt;
* any other part raises :class:`UnsupportedMessagePart` naming the part and its message.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    CachePoint,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters

# Every built-in PydanticAI adapter resolves tool_choice with this helper; the extra pins the
# PydanticAI version it was tested with.
from pydantic_ai.models._tool_choice import resolve_tool_choice
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, FinishReason, Message, ToolCall, ToolSpec

#: Key of the degradation contract in ``ModelResponse.provider_details``.
CONTRACT_KEY = "agent_failover"
#: ``ModelResponse.provider_name`` of every answer (the route is in the contract).
PROVIDER_NAME = "agent-failover"

_FINISH = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.TOOL_CALLS: "tool_call",
    FinishReason.CONTENT_FILTER: "content_filter",
}


class UnsupportedMessagePart(UserError):
    """A message part agent-failover cannot carry to a provider (named in the message)."""


def to_chat_request(
    messages: Sequence[ModelMessage],
    settings: ModelSettings | None,
    params: ModelRequestParameters,
    instructions: Sequence[str] = (),
) -> ChatRequest:
    """The ``ChatRequest`` for one PydanticAI model request (see the module docstring)."""
    system: list[str] = []
    turns: list[Message] = []
    for index, message in enumerate(messages):
        if isinstance(message, ModelRequest):
            system += _request_turns(message, index, turns)
        elif isinstance(message, ModelResponse):
            turn = _assistant_turn(message, index)
            if turn is not None:
                turns.append(turn)
        else:
            raise UnsupportedMessagePart(f"message {index}: unknown message {type(message)!r}")
    # As PydanticAI's own adapters order them: system prompts, then the instructions.
    system += [text for text in instructions if text]
    if params.output_mode == "prompted" and params.prompted_output_instructions:
        system.append(params.prompted_output_instructions)
    if not turns:
        raise UnsupportedMessagePart("the request has no user, assistant or tool turn to send")
    tools, choice = _tools_and_choice(settings, params)
    settings = settings or {}
    extra: dict[str, Any] = {}
    if "max_tokens" in settings:
        extra["max_tokens"] = settings["max_tokens"]
    if "temperature" in settings:
        extra["temperature"] = settings["temperature"]
    return ChatRequest(
        system="\n\n".join(system) or None,
        messages=turns,
        stop=list(settings.get("stop_sequences") or []),
        json_schema=_output_schema(params),
        tools=tools,
        tool_choice=choice,
        **extra,
    )


def _request_turns(message: ModelRequest, index: int, turns: list[Message]) -> list[str]:
    """Append the request's user and tool turns; return its system prompts."""
    system: list[str] = []
    for part in message.parts:
        if isinstance(part, SystemPromptPart):
            system.append(part.content)
        elif isinstance(part, UserPromptPart):
            turns.append(Message(role="user", content=_user_text(part, index)))
        elif isinstance(part, ToolReturnPart):
            text, files = part.model_response_str_and_user_content()
            if files:
                raise UnsupportedMessagePart(
                    f"message {index}: tool {part.tool_name!r} (call {part.tool_call_id}) returned "
                    "files; agent-failover sends text tool results only"
                )
            turns.append(
                Message(
                    role="tool",
                    content=text,
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                )
            )
        else:
            raise UnsupportedMessagePart(
                f"message {index}: request part {type(part).__name__} is not supported "
                "(run the model through an Agent, which prepares messages first)"
            )
    return system


def _user_text(part: UserPromptPart, index: int) -> str:
    if isinstance(part.content, str):
        return part.content
    texts: list[str] = []
    for item in part.content:
        texts += _content_text(item, index)
    return "\n".join(texts)


def _content_text(item: UserContent, index: int) -> list[str]:
    if isinstance(item, str):
        return [item]
    if isinstance(item, TextContent):  # also StructuredContent: its rendered text
        return [item.content]
    if isinstance(item, CachePoint):
        return []  # a prompt-caching marker, not content
    raise UnsupportedMessagePart(
        f"message {index}: user content {type(item).__name__} is not supported "
        "(agent-failover sends text only)"
    )


def _assistant_turn(message: ModelResponse, index: int) -> Message | None:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            texts.append(part.content)
        elif isinstance(part, ToolCallPart):
            calls.append(
                ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_dict())
            )
        elif isinstance(part, ThinkingPart):
            continue  # not conversation content (see the module docstring)
        else:
            raise UnsupportedMessagePart(
                f"message {index}: response part {type(part).__name__} is not supported"
            )
    if not texts and not calls:
        return None  # an empty response (e.g. one the agent retried) carries nothing
    return Message(role="assistant", content="".join(texts), tool_calls=calls)


def _tools_and_choice(
    settings: ModelSettings | None, params: ModelRequestParameters
) -> tuple[list[ToolSpec], str | None]:
    defs = params.declared_tool_defs
    if not defs:
        return [], None
    resolved = resolve_tool_choice(settings, params)
    names: set[str] | None = None
    if isinstance(resolved, tuple):
        mode, chosen = resolved
        names = set(chosen)
    else:
        mode = resolved
    tools = [
        ToolSpec(name=d.name, description=d.description or "", parameters=d.parameters_json_schema)
        for d in defs.values()
        if names is None or d.name in names
    ]
    if mode == "required" and len(tools) == 1:
        return tools, tools[0].name
    return tools, mode


def _output_schema(params: ModelRequestParameters) -> dict[str, Any] | None:
    if params.output_mode == "native" and params.output_object is not None:
        return params.output_object.json_schema
    return None


def to_model_response(out: AgentOutput, *, model_name: str, timestamp: datetime) -> ModelResponse:
    """The ``ModelResponse`` for ``out``: text, tool calls (ids kept), usage, finish, contract.

    ``model_name`` is the answering route's model; ``provider_details`` carries the whole
    degradation contract under :data:`CONTRACT_KEY`. A refusal has no parts and finish
    reason ``content_filter`` (PydanticAI raises ``ContentFilterError`` with its message).
    """
    details: dict[str, Any] = {CONTRACT_KEY: out.model_dump(mode="json")}
    parts: list[ModelResponsePart] = []
    if out.refusal is not None:
        details.update(finish_reason="content_filter", refusal=out.refusal)
    else:
        if out.content:
            parts.append(TextPart(content=out.content))
        parts += [
            ToolCallPart(tool_name=c.name, args=dict(c.arguments), tool_call_id=c.id)
            for c in out.tool_calls
        ]
    finish = _FINISH.get(out.finish_reason) if out.finish_reason else None
    if out.refusal is not None:
        finish = "content_filter"
    return ModelResponse(
        parts=parts,
        usage=RequestUsage(
            input_tokens=out.usage.input_tokens, output_tokens=out.usage.output_tokens
        ),
        model_name=model_name,
        timestamp=timestamp,
        provider_name=PROVIDER_NAME,
        provider_details=details,
        finish_reason=finish,  # type: ignore[arg-type]
    )


def contract_of(response: ModelResponse) -> AgentOutput | None:
    """The degradation contract stored in ``response`` (None: not answered by agent-failover)."""
    raw = (response.provider_details or {}).get(CONTRACT_KEY)
    return AgentOutput.model_validate(raw) if raw is not None else None
