"""Anthropic Messages API adapter (``POST {base}/v1/messages``), plain and streaming.

Mapping choices:

* ``system`` is the top-level ``system`` field; ``tool`` messages become ``tool_result``
  blocks in a user turn and assistant tool calls ``tool_use`` blocks; adjacent turns of
  the same role are merged, since parallel tool results must share one user turn.
* ``json_schema`` uses the API's structured outputs (``output_config.format`` of type
  ``json_schema``) where :func:`native_json` allows: the answer is a text block holding
  the JSON, the caller's tools stay offered under ``tool_choice: auto``, and objects get
  ``additionalProperties: false`` (which the API requires). Otherwise it
  is enforced with a forced tool (``tool_choice`` naming
  :data:`JSON_TOOL`): the model must fill the schema as the tool's input, which is more
  reliable than instructions. The input becomes the reply text and is not reported as a
  tool call. With user tools the JSON tool is offered, not forced (``tool_choice`` stays
  the caller's, ``auto`` by default) and the system prompt says to answer through it:
  forcing it would stop the model from ever calling the user's tools; a final answer
  given as text instead is validated against the schema like any other. When a
  ``prefill`` is also given (resuming a cut JSON answer), the schema
  is stated in the system prompt instead and the prefill continues the text.
* ``prefill`` is a trailing assistant turn. Anthropic rejects one ending in whitespace,
  so trailing whitespace is trimmed; the returned text is prefill + continuation.
* ``stop_reason`` ``refusal`` raises :class:`ContentFilterError`; a stream ``error`` event
  raises :class:`StreamErrorEvent` (COOLDOWN for ``overloaded_error``). The
  ``message_delta`` carrying ``stop_reason`` is the terminal event; ``message_stop`` is a
  trailer, waited for at most the trailer grace (as ``[DONE]`` is for OpenAI).
"""

from __future__ import annotations

import json
from typing import Any

from agent_failover.providers.classify import stream_error_event
from agent_failover.providers.wire import (
    Attempt,
    ReplyParts,
    StreamState,
    WireAdapter,
    carried,
    parse_tool_arguments,
)
from agent_failover.resilience.endpoint import EndpointConfig, ProviderKind
from agent_failover.resilience.errors import ContentFilterError
from agent_failover.resilience.models import ChatRequest, FinishReason, Reasoning, ToolCall

API_VERSION = "2023-06-01"
#: Name of the forced tool that carries structured output.
JSON_TOOL = "structured_output"
#: Told to the model when the JSON tool is offered beside the user's tools, not forced.
JSON_TOOL_HINT = (
    f"Use the other tools as needed; give your final answer by calling the {JSON_TOOL} tool."
)
#: Where a non-object schema is nested, since tool inputs must be JSON objects.
WRAP_KEY = "value"

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "pause_turn": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
}


#: Our tool_choice modes in Anthropic's words ("required" is "any").
_ANTHROPIC_TOOL_CHOICE: dict[str, dict[str, str]] = {
    "auto": {"type": "auto"},
    "none": {"type": "none"},
    "required": {"type": "any"},
}


def wrapped(schema: dict[str, Any]) -> bool:
    """Whether a schema must be nested under :data:`WRAP_KEY` (tool inputs are objects)."""
    return schema.get("type") != "object"


def tool_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The forced tool's input schema for a requested output schema."""
    if wrapped(schema):
        return {"type": "object", "properties": {WRAP_KEY: schema}, "required": [WRAP_KEY]}
    return schema


#: Content blocks of extended thinking, passed back verbatim (signatures included).
THINKING_BLOCKS = ("thinking", "redacted_thinking")


def thinking_reasoning(origin: str, blocks: list[dict[str, Any]]) -> Reasoning | None:
    """The reply's thinking blocks as :class:`Reasoning` (``None`` when it had none)."""
    kept = [b for b in blocks if b.get("type") in THINKING_BLOCKS]
    return Reasoning(origin=origin, blocks=kept) if kept else None


def _messages(endpoint: EndpointConfig, request: ChatRequest) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "tool":
            role = "user"
            blocks: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content}
            ]
        else:
            role = m.role
            own = carried(m.reasoning, endpoint) if m.role == "assistant" else None
            # With extended thinking, an assistant turn that used tools must send its
            # thinking blocks back first, unchanged; another model's are dropped.
            blocks = [dict(b) for b in own.blocks] if own is not None else []
            blocks += [{"type": "text", "text": m.content}] if m.content else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in m.tool_calls
            ]
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def force_json_tool(request: ChatRequest) -> bool:
    """Whether the structured-output tool may be forced: only when no user tool could be
    called (none declared, or ``tool_choice: none``)."""
    return not request.tools or request.tool_choice == "none"


#: Model id prefixes with structured outputs on the Claude API (Anthropic's structured
#: outputs guide, https://platform.claude.com/docs/en/build-with-claude/structured-outputs).
NATIVE_JSON_MODELS = (
    "claude-opus-4-5",
    "claude-opus-4-6",
    "claude-opus-4-7",
    "claude-sonnet-4-5",
    "claude-sonnet-4-6",
    "claude-haiku-4-5",
    "claude-mythos",
)


#: The Claude models with structured outputs on Bedrock (the same guide), as they appear
#: in Bedrock model ids and inference profiles (``us.anthropic.claude-sonnet-4-5-…``).
BEDROCK_NATIVE_JSON_MODELS = (
    "anthropic.claude-opus-4-5",
    "anthropic.claude-opus-4-6",
    "anthropic.claude-sonnet-4-5",
    "anthropic.claude-sonnet-4-6",
    "anthropic.claude-haiku-4-5",
)


def native_json_default(endpoint: EndpointConfig) -> bool:
    """The capability when unset: the Claude API or Bedrock with a listed model."""
    if endpoint.cloud is None and endpoint.provider is ProviderKind.ANTHROPIC:
        return endpoint.model.startswith(NATIVE_JSON_MODELS)
    if endpoint.provider is ProviderKind.BEDROCK:
        return any(m in endpoint.model for m in BEDROCK_NATIVE_JSON_MODELS)
    return False


def native_json(endpoint: EndpointConfig, request: ChatRequest) -> bool:
    """Whether ``json_schema`` goes on the wire as the API's structured output: an object
    schema, no prefill (the answer must start fresh), and the route's capability (by
    default :func:`native_json_default`)."""
    schema = request.json_schema
    if schema is None or wrapped(schema) or prefill_text(request):
        return False
    wanted = endpoint.capabilities.native_json_schema
    return native_json_default(endpoint) if wanted is None else wanted


_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")


def closed_schema(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that leaves it
    unset (structured outputs require it); any answer it allows the original allows too."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: closed_schema(v) for k, v in out[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [closed_schema(v) for v in out[key]]
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = closed_schema(out[key])
    if (out.get("type") == "object" or "properties" in out) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def prefill_text(request: ChatRequest) -> str:
    """The assistant text the reply continues: the prefill with trailing whitespace trimmed."""
    return (request.prefill or "").rstrip()


def _structured_output(
    endpoint: EndpointConfig,
    request: ChatRequest,
    body: dict[str, Any],
    tools: list[dict[str, Any]],
    system: str,
    prefill: str,
) -> str:
    """Put ``json_schema`` on the wire (JSON tool into ``tools``, maybe ``tool_choice``
    into ``body``); returns the system prompt, extended when the schema goes there."""
    if request.json_schema is None:
        return system
    if native_json(endpoint, request):
        body["output_config"] = {
            "format": {"type": "json_schema", "schema": closed_schema(request.json_schema)}
        }
        return system
    sep = f"{system}\n\n" if system else ""
    if prefill:
        return (
            sep
            + "Answer with JSON only, valid against this JSON Schema:\n"
            + json.dumps(request.json_schema)
        )
    tools.append(
        {
            "name": JSON_TOOL,
            "description": "Return the final answer as structured data.",
            "input_schema": tool_schema(request.json_schema),
        }
    )
    if force_json_tool(request):
        body["tool_choice"] = {"type": "tool", "name": JSON_TOOL}
        return system
    return sep + JSON_TOOL_HINT


def build_body(endpoint: EndpointConfig, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
    """The Messages API request body for ``request``."""
    body: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": min(request.max_tokens, endpoint.max_output_tokens),
        "messages": _messages(endpoint, request),
    }
    prefill = prefill_text(request)
    tools = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters}
        for t in request.tools
    ]
    system = _structured_output(endpoint, request, body, tools, request.system or "", prefill)
    if prefill:
        body["messages"].append({"role": "assistant", "content": prefill})
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools
        choice = request.tool_choice
        if choice is None and request.json_schema is not None and not prefill:
            choice = "auto"
        if choice is not None and "tool_choice" not in body:
            body["tool_choice"] = _ANTHROPIC_TOOL_CHOICE.get(choice) or {
                "type": "tool",
                "name": choice,
            }
    if request.temperature is not None:
        # Anthropic's range is 0-1; the normalized request allows OpenAI's 0-2.
        body["temperature"] = min(request.temperature, 1.0)
    if request.stop:
        body["stop_sequences"] = request.stop
    if stream:
        body["stream"] = True
    return body


def build_headers(key: str | None) -> dict[str, str]:
    """Headers of every call; the key goes only into ``x-api-key``."""
    headers = {"anthropic-version": API_VERSION, "content-type": "application/json"}
    if key is not None:
        headers["x-api-key"] = key
    return headers


def url(endpoint: EndpointConfig) -> str:
    """``{base}/v1/messages``: Anthropic base URLs carry no version, as in the official SDK."""
    return f"{endpoint.base()}/v1/messages"


def _finish(call: Attempt, stop_reason: Any, partial: str) -> FinishReason:
    if stop_reason == "refusal":
        raise ContentFilterError(
            "the model refused (stop_reason=refusal)",
            endpoint=call.name,
            status=200,
            partial_text=partial,
        )
    return _FINISH.get(stop_reason, FinishReason.STOP)


def json_tool_text(value: Any, is_wrapped: bool) -> str:
    """The forced tool's input as the reply text (unwrapped when it was nested)."""
    if is_wrapped and isinstance(value, dict) and WRAP_KEY in value:
        value = value[WRAP_KEY]
    return json.dumps(value)


def parse_reply(call: Attempt, payload: Any) -> ReplyParts:
    """Read a non-streaming Messages response."""
    if payload.get("type") == "error":
        raise stream_error_event(payload.get("error"), endpoint=call.name)
    forced = call.request.json_schema is not None and not prefill_text(call.request)
    texts: list[str] = []
    calls: list[ToolCall] = []
    json_text: str | None = None
    for block in payload["content"]:
        if block.get("type") == "text":
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            if forced and block.get("name") == JSON_TOOL:
                json_text = json_tool_text(
                    block.get("input"), wrapped(call.request.json_schema or {})
                )
            else:
                calls.append(parse_tool_arguments(block["id"], block["name"], block.get("input")))
    text = json_text if json_text is not None else "".join(texts)
    finish = _finish(call, payload.get("stop_reason"), text)
    if json_text is not None and finish is FinishReason.TOOL_CALLS and not calls:
        finish = FinishReason.STOP  # the forced tool *is* the answer
    usage = payload.get("usage") or {}
    return ReplyParts(
        text=text,
        model=payload.get("model"),
        finish=finish,
        input_tokens=_input_tokens(usage),
        output_tokens=usage.get("output_tokens"),
        tool_calls=calls,
        reasoning=thinking_reasoning(call.origin, payload["content"]),
    )


def _input_tokens(usage: dict[str, Any]) -> int | None:
    if "input_tokens" not in usage:
        return None
    # Cached prompt tokens are still prompt tokens for window and cost accounting.
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


class AnthropicStream(StreamState):
    """Folds ``message_start`` … ``message_stop`` events."""

    def __init__(self, call: Attempt) -> None:
        super().__init__(call.name, call.prefix)
        self._call = call
        self._forced = call.request.json_schema is not None and not call.prefix
        self._blocks: dict[int, dict[str, Any]] = {}

    def on_payload(self, event_name: str, payload: Any) -> None:
        """Apply one Messages stream event."""
        kind = payload.get("type") or event_name
        if kind == "message_start":
            message = payload["message"]
            self.model = message.get("model") or self.model
            usage = message.get("usage") or {}
            self.input_tokens = _input_tokens(usage)
        elif kind == "content_block_start":
            block = dict(payload["content_block"])
            block["partial_json"] = ""
            self._blocks[int(payload["index"])] = block
        elif kind == "content_block_delta":
            self._delta(int(payload["index"]), payload["delta"])
        elif kind == "message_delta":
            usage = payload.get("usage") or {}
            if "output_tokens" in usage:
                self.output_tokens = int(usage["output_tokens"])
            if usage.get("input_tokens") is not None:
                self.input_tokens = _input_tokens(usage)
            stop = (payload.get("delta") or {}).get("stop_reason")
            if stop is not None:
                self.finish = _finish(self._call, stop, self.text)
                # The content and final usage are complete here; message_stop is only a
                # trailer, so a connection held open without it must not stall the call.
                self.finished = True
        elif kind == "message_stop":
            self.finished = self.done = True
        elif kind == "error":
            error = payload.get("error", payload)
            raise stream_error_event(error, endpoint=self.endpoint, partial_text=self.text)
        # ping, content_block_stop and future event types carry nothing we need.

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        kind = delta.get("type")
        if kind == "text_delta":
            self.add_text(delta["text"])
        elif kind == "thinking_delta":
            block = self._blocks[index]
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "signature_delta":
            self._blocks[index]["signature"] = delta.get("signature", "")
        elif kind == "input_json_delta":
            block = self._blocks[index]
            fragment = delta.get("partial_json", "")
            if self._forced and block.get("name") == JSON_TOOL:
                block["partial_json"] += fragment
                self.add_text(fragment)
            else:
                block["partial_json"] += fragment
                self.content_events += 1

    def tool_calls(self) -> list[ToolCall]:
        """Tool calls of the stream (the forced JSON tool excluded)."""
        calls: list[ToolCall] = []
        for _, block in sorted(self._blocks.items()):
            if block.get("type") != "tool_use":
                continue
            if self._forced and block.get("name") == JSON_TOOL:
                continue
            raw = block["partial_json"] or block.get("input") or {}
            calls.append(parse_tool_arguments(block.get("id", ""), block.get("name", ""), raw))
        return calls

    def reasoning(self) -> Reasoning | None:
        """The streamed thinking blocks, assembled from their deltas."""
        blocks = [
            {k: v for k, v in block.items() if k != "partial_json"}
            for _, block in sorted(self._blocks.items())
        ]
        return thinking_reasoning(self._call.origin, blocks)

    def finalize(self) -> None:
        """The forced tool is the answer: unwrap a non-object schema, report it as a stop."""
        if not self._forced:
            return
        if self.finish is FinishReason.TOOL_CALLS and not self.tool_calls():
            self.finish = FinishReason.STOP
        if wrapped(self._call.request.json_schema or {}):
            try:
                value = json.loads(self.text)
            except ValueError:
                return  # truncated: validation reports it with the raw text
            self.text = json_tool_text(value, True)


class AnthropicWire(WireAdapter):
    """The Messages API: ``x-api-key`` auth, ``{base}/v1/messages``, SSE streams."""

    def prefix(self, request: ChatRequest) -> str:
        """The prefill with trailing whitespace trimmed (Anthropic rejects it otherwise)."""
        return prefill_text(request)

    def headers(self, key: str | None, *, stream: bool) -> dict[str, str]:
        """:func:`build_headers`."""
        return build_headers(key)

    def body(self, endpoint: EndpointConfig, request: ChatRequest, *, stream: bool) -> Any:
        """:func:`build_body`."""
        return build_body(endpoint, request, stream=stream)

    def url(self, endpoint: EndpointConfig, *, stream: bool) -> str:
        """:func:`url` (the same for streaming: ``stream`` is in the body)."""
        return url(endpoint)

    def parse_reply(self, call: Attempt, payload: Any) -> ReplyParts:
        """:func:`parse_reply`."""
        return parse_reply(call, payload)

    def stream_state(self, call: Attempt) -> StreamState:
        """An :class:`AnthropicStream`."""
        return AnthropicStream(call)


WIRE = AnthropicWire()
