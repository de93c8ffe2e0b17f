"""OpenAI Chat Completions adapter (``POST {base}/chat/completions``) and compatibles.

Covers OpenAI and every server that speaks its wire format (Mistral, DeepSeek, vLLM,
Ollama). Mapping choices:

* ``json_schema`` → ``response_format: {type: json_schema, json_schema: {name, schema,
  strict: false}}``; strict mode would reject any schema that is not closed and fully
  required, and validation happens on our side anyway (:mod:`providers.validate`).
* ``max_tokens`` is sent as ``max_completion_tokens`` to OpenAI itself (the field its
  current models require) and as ``max_tokens`` to compatible servers, which know only that.
* ``stream_options.include_usage`` is requested on every streamed call (compatible servers
  report usage only when asked); ``capabilities.stream_usage: false`` turns it off for a
  server that rejects the field.
* A tool call with an empty ``id`` (Gemini's OpenAI-compatible endpoint sends ``""``) gets
  a generated ``call_N`` id, so its result can be matched to it.
* ``reasoning_content`` (DeepSeek, Kimi, vLLM / SGLang reasoning parsers) is not part of
  the answer; it is kept as :class:`Reasoning` and sent back on the assistant turn that
  made tool calls (those servers require it within a tool loop), only to the same wire and
  model.
* ``prefill`` is a trailing assistant message with ``prefix: true`` (Mistral / DeepSeek
  style) and is sent only to endpoints declaring ``assistant_prefill``; others fail fast
  with an :class:`InvalidRequestError` whose decision is FAILOVER (another route can).
* Terminal: the chunk carrying ``finish_reason``; ``data: [DONE]`` and the usage chunk
  are trailers, waited for at most the trailer grace. ``finish_reason: content_filter``,
  a ``refusal`` and an ``{"error": ...}`` chunk raise their typed errors.
"""

from __future__ import annotations

import json
from typing import Any

from agent_failover.providers.classify import stream_error_event
from agent_failover.providers.sse import SSEEvent
from agent_failover.providers.wire import (
    Attempt,
    ReplyParts,
    StreamState,
    WireAdapter,
    carried,
    parse_tool_arguments,
)
from agent_failover.resilience.endpoint import Cloud, EndpointConfig
from agent_failover.resilience.errors import ContentFilterError, Decision, InvalidRequestError
from agent_failover.resilience.models import (
    TOOL_CHOICE_MODES,
    ChatRequest,
    FinishReason,
    Message,
    Reasoning,
    ToolCall,
)

#: ``response_format.json_schema.name`` of structured output.
SCHEMA_NAME = "output"
#: The stream's end marker.
DONE = "[DONE]"

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "model_length": FinishReason.LENGTH,  # Mistral
}


def _is_openai(endpoint: EndpointConfig) -> bool:
    # Azure OpenAI runs OpenAI's own models and API (max_completion_tokens, stream_options).
    return endpoint.organisation == "openai" or endpoint.cloud is Cloud.AZURE


def _message(endpoint: EndpointConfig, m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["content"] = m.content or None
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.raw_arguments or json.dumps(c.arguments),
                },
            }
            for c in m.tool_calls
        ]
        own = carried(m.reasoning, endpoint)
        if own is not None and own.text:
            out["reasoning_content"] = own.text
    return out


def build_body(endpoint: EndpointConfig, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
    """The Chat Completions request body for ``request``."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages += [_message(endpoint, m) for m in request.messages]
    if request.prefill:
        if not endpoint.capabilities.assistant_prefill:
            raise InvalidRequestError(
                "this route does not support assistant prefill",
                endpoint=endpoint.name,
                decision=Decision.FAILOVER,
            )
        messages.append({"role": "assistant", "content": request.prefill, "prefix": True})
    body: dict[str, Any] = {"model": endpoint.model, "messages": messages}
    max_tokens = min(request.max_tokens, endpoint.max_output_tokens)
    body["max_completion_tokens" if _is_openai(endpoint) else "max_tokens"] = max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop:
        body["stop"] = request.stop
    if request.json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "schema": request.json_schema, "strict": False},
        }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
        choice = request.tool_choice
        if choice is not None:
            body["tool_choice"] = (
                choice
                if choice in TOOL_CHOICE_MODES
                else {"type": "function", "function": {"name": choice}}
            )
    if stream:
        body["stream"] = True
        if endpoint.capabilities.stream_usage:
            body["stream_options"] = {"include_usage": True}
    return body


def build_headers(key: str | None) -> dict[str, str]:
    """Headers of every call; the key goes only into ``Authorization: Bearer``."""
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return headers


def url(endpoint: EndpointConfig) -> str:
    """``{base}/chat/completions``: OpenAI base URLs include ``/v1``, as in the official SDK."""
    return f"{endpoint.base()}/chat/completions"


def _finish(call: Attempt, reason: Any, partial: str) -> FinishReason:
    if reason == "content_filter":
        raise ContentFilterError(
            "output blocked by the content filter (finish_reason=content_filter)",
            endpoint=call.name,
            status=200,
            partial_text=partial,
        )
    return _FINISH.get(reason, FinishReason.STOP)


def _refused(call: Attempt, refusal: str, partial: str) -> ContentFilterError:
    return ContentFilterError(
        f"the model refused: {refusal[:200]}", endpoint=call.name, status=200, partial_text=partial
    )


def parse_reply(call: Attempt, payload: Any) -> ReplyParts:
    """Read a non-streaming Chat Completions response."""
    if isinstance(payload.get("error"), dict):
        raise stream_error_event(payload["error"], endpoint=call.name)
    choice = payload["choices"][0]
    message = choice.get("message") or {}
    text = message.get("content") or ""
    if message.get("refusal"):
        raise _refused(call, str(message["refusal"]), text)
    finish = _finish(call, choice.get("finish_reason"), text)
    calls = [
        parse_tool_arguments(
            tc.get("id") or f"call_{i}",
            tc["function"].get("name", ""),
            tc["function"].get("arguments"),
        )
        for i, tc in enumerate(message.get("tool_calls") or [])
    ]
    usage = payload.get("usage") or {}
    thought = message.get("reasoning_content")
    return ReplyParts(
        text=text,
        model=payload.get("model"),
        finish=finish,
        input_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        tool_calls=calls,
        reasoning=Reasoning(origin=call.origin, text=thought) if thought else None,
    )


class OpenAIStream(StreamState):
    """Folds ``chat.completion.chunk`` events up to ``[DONE]``."""

    def __init__(self, call: Attempt) -> None:
        super().__init__(call.name, call.prefix)
        self._call = call
        self._tools: dict[int, dict[str, str]] = {}
        self._refusal = ""
        self._thought = ""

    def decode(self, event: SSEEvent) -> Any:
        """``[DONE]`` ends the stream; everything else is JSON."""
        if event.data.strip() == DONE:
            self.finished = self.done = True
            return None
        return super().decode(event)

    def on_payload(self, event_name: str, payload: Any) -> None:
        """Apply one chunk."""
        if payload.get("error"):
            raise stream_error_event(
                payload["error"], endpoint=self.endpoint, partial_text=self.text
            )
        self.model = payload.get("model") or self.model
        usage = payload.get("usage")
        if isinstance(usage, dict):
            self.input_tokens = usage.get("prompt_tokens", self.input_tokens)
            self.output_tokens = usage.get("completion_tokens", self.output_tokens)
        for choice in payload.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # n=1 is all we ask for
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str):
                self.add_text(content)
            if delta.get("refusal"):
                self._refusal += str(delta["refusal"])
            if isinstance(delta.get("reasoning_content"), str):
                self._thought += delta["reasoning_content"]
            for tc in delta.get("tool_calls") or []:
                self._tool_delta(tc)
            reason = choice.get("finish_reason")
            if reason is not None:
                if self._refusal:
                    raise _refused(self._call, self._refusal, self.text)
                self.finish = _finish(self._call, reason, self.text)
                self.finished = True
        if self.finished and self.output_tokens is not None:
            self.done = True  # usage came with (or after) the finish: nothing left to wait for

    def _tool_delta(self, tc: dict[str, Any]) -> None:
        slot = self._tools.setdefault(int(tc.get("index", 0)), {"id": "", "name": "", "args": ""})
        fn = tc.get("function") or {}
        if tc.get("id"):
            slot["id"] = tc["id"]
        if fn.get("name"):
            slot["name"] += fn["name"]
        if fn.get("arguments"):
            slot["args"] += fn["arguments"]
        self.content_events += 1

    def reasoning(self) -> Reasoning | None:
        """The streamed ``reasoning_content``, if the server sent any."""
        return Reasoning(origin=self._call.origin, text=self._thought) if self._thought else None

    def tool_calls(self) -> list[ToolCall]:
        """Tool calls assembled from their streamed fragments."""
        return [
            parse_tool_arguments(t["id"] or f"call_{i}", t["name"], t["args"])
            for i, (_, t) in enumerate(sorted(self._tools.items()))
        ]


class OpenAIWire(WireAdapter):
    """Chat Completions: ``Authorization: Bearer`` auth, ``{base}/chat/completions``, SSE."""

    def headers(self, key: str | None, *, stream: bool) -> dict[str, str]:
        """:func:`build_headers`."""
        return build_headers(key)

    def body(self, endpoint: EndpointConfig, request: ChatRequest, *, stream: bool) -> Any:
        """:func:`build_body` (refuses a prefill the route does not support)."""
        return build_body(endpoint, request, stream=stream)

    def url(self, endpoint: EndpointConfig, *, stream: bool) -> str:
        """:func:`url` (the same for streaming: ``stream`` is in the body)."""
        return url(endpoint)

    def parse_reply(self, call: Attempt, payload: Any) -> ReplyParts:
        """:func:`parse_reply`."""
        return parse_reply(call, payload)

    def stream_state(self, call: Attempt) -> StreamState:
        """An :class:`OpenAIStream`."""
        return OpenAIStream(call)


WIRE = OpenAIWire()
