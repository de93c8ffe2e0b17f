"""Amazon Bedrock Converse adapter (``POST {base}/model/{modelId}/converse[-stream]``).

One wire for every model Bedrock serves (Claude, Llama, Mistral, Nova); ``model`` may
be a foundation-model id (``anthropic.claude-sonnet-4-5-20250929-v1:0``), a
cross-region inference profile (``us.anthropic…``, ``global.anthropic…``) or an ARN,
and is percent-encoded into the path as botocore does. Requests are signed with SigV4
by the credential store (:mod:`providers.auth`) or carry a Bedrock API key as a bearer
token. ConverseStream answers in the binary AWS event-stream framing, decoded by
botocore's parser (:mod:`providers.eventstream`) under the same TTFT / idle / total
budgets as the SSE wires. Mapping choices:

* ``system`` → ``system[{text}]``; tool calls are ``toolUse`` blocks and tool results
  ``toolResult`` blocks in a user turn; adjacent same-role turns merge; empty text
  blocks are dropped (Converse rejects blank text).
* ``json_schema`` → on the Claude models with structured outputs (or where
  ``capabilities.native_json_schema`` says so), ``outputConfig.textFormat`` (type
  ``json_schema``, the schema as a JSON string) and the answer is the text, with user
  tools under ``toolChoice.auto``; otherwise a forced tool (``toolChoice.tool``) whose
  input is the answer, as for Anthropic; beside user tools it is offered with
  ``toolChoice.auto`` (or the caller's choice) and the answer validated, so the user's
  tools can still be called; ``tool_choice`` → ``auto`` / ``any`` / ``tool`` (Converse
  has no ``none``: the tools stay declared); ``prefill`` → a trailing assistant turn (trailing
  whitespace trimmed).
* Stream events ``messageStart``, ``contentBlockStart`` / ``Delta`` / ``Stop``,
  ``messageStop`` (the terminal event, with ``stopReason``), then ``metadata`` (usage,
  a trailer waited for at most the trailer grace). An exception frame
  (``throttlingException``, ``modelStreamErrorException``,
  ``serviceUnavailableException``, …) raises :class:`StreamErrorEvent` (COOLDOWN for
  throttling and unavailability); a frame whose JSON will not parse is skipped and
  counted; a broken checksum fails the stream as malformed at once.
* ``reasoningContent`` blocks (extended thinking: ``reasoningText`` with its
  ``signature``, or ``redactedContent``) are not the answer; they are kept as
  :class:`Reasoning` and sent back first in the assistant turn, to the same model only.
* ``stopReason`` ``guardrail_intervened`` / ``content_filtered`` raise
  :class:`ContentFilterError`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from agent_failover.providers.anthropic import (
    JSON_TOOL,
    JSON_TOOL_HINT,
    closed_schema,
    force_json_tool,
    json_tool_text,
    native_json,
    prefill_text,
    tool_schema,
    wrapped,
)
from agent_failover.providers.classify import stream_error_event
from agent_failover.providers.eventstream import EventStreamDecoder, Frame
from agent_failover.providers.extras import BOTOCORE, MissingExtraError, require
from agent_failover.providers.wire import (
    Attempt,
    ReplyParts,
    StreamDecoder,
    StreamState,
    WireAdapter,
    carried,
    parse_tool_arguments,
)
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.errors import AuthError, ContentFilterError
from agent_failover.resilience.models import (
    ChatRequest,
    FinishReason,
    Message,
    Reasoning,
    ToolCall,
)

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
}
_FILTERED = {"guardrail_intervened", "content_filtered"}


def _reasoning(origin: str, blocks: list[dict[str, Any]]) -> Reasoning | None:
    kept = [b for b in blocks if isinstance(b.get("reasoningContent"), dict)]
    return Reasoning(origin=origin, blocks=kept) if kept else None


def _blocks(endpoint: EndpointConfig, m: Message) -> tuple[str, list[dict[str, Any]]]:
    if m.role == "tool":
        result = {"toolUseId": m.tool_call_id or "", "content": [{"text": m.content or " "}]}
        return "user", [{"toolResult": result}]
    own = carried(m.reasoning, endpoint) if m.role == "assistant" else None
    blocks: list[dict[str, Any]] = [dict(b) for b in own.blocks] if own is not None else []
    blocks += [{"text": m.content}] if m.content else []
    blocks += [
        {"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}} for c in m.tool_calls
    ]
    return m.role, blocks


def _messages(endpoint: EndpointConfig, request: ChatRequest) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for m in request.messages:
        role, blocks = _blocks(endpoint, m)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    prefill = prefill_text(request)
    if prefill:
        turns.append({"role": "assistant", "content": [{"text": prefill}]})
    return turns


def _tool_config(request: ChatRequest, forced: bool, native: bool) -> dict[str, Any] | None:
    tools = [
        {
            "toolSpec": {
                "name": t.name,
                "description": t.description or t.name,
                "inputSchema": {"json": t.parameters},
            }
        }
        for t in request.tools
    ]
    if forced:
        spec = {
            "name": JSON_TOOL,
            "description": "Return the final answer as structured data.",
            "inputSchema": {"json": tool_schema(request.json_schema or {})},
        }
        tools.append({"toolSpec": spec})
    if not tools:
        return None
    config: dict[str, Any] = {"tools": tools}
    choice = request.tool_choice
    if forced and force_json_tool(request):
        config["toolChoice"] = {"tool": {"name": JSON_TOOL}}
    elif (forced or native) and choice is None:
        config["toolChoice"] = {"auto": {}}
    elif choice in ("auto", "required"):
        config["toolChoice"] = {"auto": {}} if request.tool_choice == "auto" else {"any": {}}
    elif request.tool_choice is not None and request.tool_choice != "none":
        config["toolChoice"] = {"tool": {"name": request.tool_choice}}
    # "none": Converse has no such mode; the tools stay declared (earlier toolUse blocks
    # need them) and the model chooses, as with "auto".
    return config


def _forced(request: ChatRequest) -> bool:
    return request.json_schema is not None and not prefill_text(request)


def output_config(schema: dict[str, Any]) -> dict[str, Any]:
    """Converse's structured output: ``outputConfig.textFormat`` with the schema as a
    JSON string (``JsonSchemaDefinition.schema`` is a string), objects closed."""
    definition = {"schema": json.dumps(closed_schema(schema)), "name": JSON_TOOL}
    return {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": definition}}}


def build_body(endpoint: EndpointConfig, request: ChatRequest) -> dict[str, Any]:
    """The Converse request body for ``request`` (the same for ConverseStream)."""
    inference: dict[str, Any] = {"maxTokens": min(request.max_tokens, endpoint.max_output_tokens)}
    if request.temperature is not None:
        # Bedrock's text models take 0-1; the normalized request allows OpenAI's 0-2.
        inference["temperature"] = min(request.temperature, 1.0)
    if request.stop:
        inference["stopSequences"] = request.stop
    body: dict[str, Any] = {"messages": _messages(endpoint, request), "inferenceConfig": inference}
    system = request.system or ""
    native = native_json(endpoint, request)
    forced = _forced(request) and not native
    if native:
        body["outputConfig"] = output_config(request.json_schema or {})
    elif request.json_schema is not None and not forced:
        # Resuming a cut JSON answer: the prefill continues text, so state the schema.
        system = (f"{system}\n\n" if system else "") + (
            "Answer with JSON only, valid against this JSON Schema:\n"
            + json.dumps(request.json_schema)
        )
    if forced and not force_json_tool(request):
        system = (f"{system}\n\n" if system else "") + JSON_TOOL_HINT
    if system:
        body["system"] = [{"text": system}]
    tools = _tool_config(request, forced, native)
    if tools is not None:
        body["toolConfig"] = tools
    return body


def url(endpoint: EndpointConfig, *, stream: bool) -> str:
    """``{base}/model/{modelId}/converse`` or ``…/converse-stream``, the id fully escaped."""
    model = quote(endpoint.model, safe="")
    return f"{endpoint.base()}/model/{model}/{'converse-stream' if stream else 'converse'}"


def build_headers(key: str | None, *, stream: bool) -> dict[str, str]:
    """JSON in, JSON or event-stream out; a Bedrock API key goes in ``Authorization``."""
    headers = {
        "content-type": "application/json",
        "accept": "application/vnd.amazon.eventstream" if stream else "application/json",
    }
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return headers


def _finish(call: Attempt, reason: Any, partial: str) -> FinishReason:
    if reason in _FILTERED:
        raise ContentFilterError(
            f"output blocked (stopReason={reason})",
            endpoint=call.name,
            status=200,
            partial_text=partial,
        )
    return _FINISH.get(reason, FinishReason.STOP)


def _usage(usage: Any) -> tuple[int | None, int | None]:
    if not isinstance(usage, dict) or "inputTokens" not in usage:
        return None, None
    # Cached prompt tokens are still prompt tokens for window and cost accounting.
    prompt = sum(
        int(usage.get(k) or 0)
        for k in ("inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
    )
    return prompt, int(usage.get("outputTokens") or 0)


def parse_reply(call: Attempt, payload: Any) -> ReplyParts:
    """Read a Converse response."""
    forced = _forced(call.request)
    texts: list[str] = []
    calls: list[ToolCall] = []
    json_text: str | None = None
    for block in payload["output"]["message"]["content"]:
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            if forced and use.get("name") == JSON_TOOL:
                json_text = json_tool_text(
                    use.get("input"), wrapped(call.request.json_schema or {})
                )
            else:
                calls.append(parse_tool_arguments(use["toolUseId"], use["name"], use.get("input")))
    text = json_text if json_text is not None else "".join(texts)
    finish = _finish(call, payload.get("stopReason"), text)
    if json_text is not None and finish is FinishReason.TOOL_CALLS and not calls:
        finish = FinishReason.STOP  # the forced tool *is* the answer
    input_tokens, output_tokens = _usage(payload.get("usage"))
    return ReplyParts(
        text=text,
        model=None,
        finish=finish,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tool_calls=calls,
        reasoning=_reasoning(call.origin, payload["output"]["message"]["content"]),
    )


class BedrockStream(StreamState):
    """Folds ConverseStream frames: content events up to ``messageStop``, then ``metadata``."""

    def __init__(self, call: Attempt) -> None:
        super().__init__(call.name, call.prefix)
        self._call = call
        self._forced = _forced(call.request)
        self._tools: dict[int, dict[str, str]] = {}
        self._thinking: dict[int, dict[str, Any]] = {}

    def new_decoder(self) -> StreamDecoder:
        """The AWS event-stream decoder (botocore's parser)."""
        return EventStreamDecoder()

    def on_event(self, event: Frame) -> None:  # type: ignore[override]
        """Fold one frame; an exception frame raises, a bad JSON payload is skipped."""
        self.events += 1
        if event.is_error:
            raise stream_error_event(
                {"type": event.name, "message": _message_of(event.payload)},
                endpoint=self.endpoint,
                partial_text=self.text,
            )
        try:
            payload = json.loads(event.payload)
            self.on_payload(event.name, payload)
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError, IndexError):
            self.malformed += 1

    def on_payload(self, event_name: str, payload: Any) -> None:
        """Apply one event's payload."""
        if event_name == "contentBlockStart":
            start = payload["start"].get("toolUse")
            if isinstance(start, dict):
                slot = {"id": start["toolUseId"], "name": start["name"], "args": ""}
                self._tools[int(payload["contentBlockIndex"])] = slot
        elif event_name == "contentBlockDelta":
            self._delta(int(payload.get("contentBlockIndex", 0)), payload["delta"])
        elif event_name == "messageStop":
            self.finish = _finish(self._call, payload.get("stopReason"), self.text)
            self.finished = True
        elif event_name == "metadata":
            self.input_tokens, self.output_tokens = _usage(payload.get("usage"))
            self.finished = self.done = True
        # messageStart, contentBlockStop and future events carry nothing we need.

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("text"), str):
            self.add_text(delta["text"])
        elif isinstance(delta.get("reasoningContent"), dict):
            self._reasoning_delta(index, delta["reasoningContent"])
        elif isinstance(delta.get("toolUse"), dict):
            fragment = str(delta["toolUse"].get("input", ""))
            slot = self._tools.setdefault(index, {"id": "", "name": "", "args": ""})
            slot["args"] += fragment
            if self._forced and slot["name"] == JSON_TOOL:
                self.add_text(fragment)
            else:
                self.content_events += 1

    def _reasoning_delta(self, index: int, part: dict[str, Any]) -> None:
        block = self._thinking.setdefault(index, {})
        if "redactedContent" in part:
            block["redactedContent"] = part["redactedContent"]
            return
        text = block.setdefault("reasoningText", {"text": ""})
        text["text"] += str(part.get("text") or "")
        if part.get("signature"):
            text["signature"] = part["signature"]

    def reasoning(self) -> Reasoning | None:
        """The streamed reasoning blocks, assembled from their deltas."""
        blocks = [{"reasoningContent": b} for _, b in sorted(self._thinking.items())]
        return _reasoning(self._call.origin, blocks)

    def tool_calls(self) -> list[ToolCall]:
        """Tool calls of the stream (the forced JSON tool excluded)."""
        return [
            parse_tool_arguments(t["id"], t["name"], t["args"] or "{}")
            for _, t in sorted(self._tools.items())
            if not (self._forced and t["name"] == JSON_TOOL)
        ]

    def finalize(self) -> None:
        """The forced tool is the answer: report it as a stop, unwrap a nested schema."""
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


def _message_of(payload: bytes) -> str:
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return payload.decode("utf-8", errors="replace")
    return str(data.get("message") or data.get("Message") or data) if isinstance(data, dict) else ""


class BedrockWire(WireAdapter):
    """Converse: SigV4 (added by the signer) or a bearer API key, event-stream streams."""

    def prefix(self, request: ChatRequest) -> str:
        """The prefill with trailing whitespace trimmed, as for Anthropic."""
        return prefill_text(request)

    def check(self, endpoint: EndpointConfig, *, stream: bool) -> None:
        """A stream needs botocore's event-stream parser: without it the route cannot serve."""
        if not stream:
            return
        try:
            require(BOTOCORE[0] + ".eventstream", BOTOCORE[1], "Bedrock")
        except MissingExtraError as exc:
            raise AuthError(str(exc), endpoint=endpoint.name) from exc

    def headers(self, key: str | None, *, stream: bool) -> dict[str, str]:
        """:func:`build_headers`."""
        return build_headers(key, stream=stream)

    def body(self, endpoint: EndpointConfig, request: ChatRequest, *, stream: bool) -> Any:
        """:func:`build_body` (the same for ConverseStream)."""
        return build_body(endpoint, request)

    def url(self, endpoint: EndpointConfig, *, stream: bool) -> str:
        """:func:`url`."""
        return url(endpoint, stream=stream)

    def parse_reply(self, call: Attempt, payload: Any) -> ReplyParts:
        """:func:`parse_reply`."""
        return parse_reply(call, payload)

    def stream_state(self, call: Attempt) -> StreamState:
        """A :class:`BedrockStream`."""
        return BedrockStream(call)


WIRE = BedrockWire()
