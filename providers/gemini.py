"""Gemini ``generateContent`` adapter (``POST {base}/v1beta/models/{model}:generateContent``).

Streaming uses ``:streamGenerateContent?alt=sse``: every event is a whole
``GenerateContentResponse`` carrying a text delta, and the last one carries
``finishReason`` (the terminal event; there is no ``[DONE]``). Mapping choices:

* ``system`` → ``systemInstruction``; assistant turns have role ``model``; tool results are
  ``functionResponse`` parts (whose ``name`` comes from the message, else from the call
  it answers); adjacent same-role turns are merged.
* ``json_schema`` → ``generationConfig.responseMimeType: application/json`` plus
  ``responseJsonSchema``, which takes JSON Schema itself (``$ref``/``$defs``, ``anyOf``,
  enums of any type, ``additionalProperties``), so recursive models, nested models,
  discriminated unions and ``dict`` fields keep their structure; :func:`to_json_schema`
  only spells ``const`` as a one-value ``enum`` and drops ``$schema`` / ``discriminator``.
  Tool parameters still go through :func:`to_gemini_schema` (the OpenAPI subset).
* ``prefill`` is a trailing ``model`` turn, which Gemini continues.
* ``finishReason`` SAFETY / RECITATION / BLOCKLIST / PROHIBITED_CONTENT / SPII / LANGUAGE /
  IMAGE_* / MODEL_ARMOR and ``promptFeedback.blockReason`` raise :class:`ContentFilterError`;
  MALFORMED_FUNCTION_CALL / UNEXPECTED_TOOL_CALL / TOO_MANY_TOOL_CALLS raise
  :class:`MalformedToolCallError`; any other reason than STOP / MAX_TOKENS (OTHER, a
  reason added after this was written) raises :class:`MalformedStreamError` naming it;
  thinking parts
  (``thought: true``) are not part of the answer, but their tokens are billed as output.
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
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.errors import (
    ContentFilterError,
    MalformedStreamError,
    MalformedToolCallError,
)
from agent_failover.resilience.models import (
    TOOL_CHOICE_MODES,
    ChatRequest,
    FinishReason,
    Reasoning,
    ToolCall,
)

# Every documented finishReason (Gemini API ``Candidate.FinishReason`` and Vertex AI's,
# which adds MODEL_ARMOR), by the decision it gets: a refusal, a bad tool call, or an
# ordinary ending. Anything else is an error that names the reason, never a quiet "stop".
_BLOCKED = frozenset(
    {
        "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "LANGUAGE", "MODEL_ARMOR",
    }
)  # fmt: skip
_BAD_TOOL_CALL = frozenset(
    {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"}
)
_FINISH = {"STOP": FinishReason.STOP, "MAX_TOKENS": FinishReason.LENGTH}
# JSON Schema keywords Gemini's Schema object understands; everything else is dropped
# because the API rejects unknown fields (additionalProperties, $schema, $defs, ...).
_SCHEMA_KEYS = {
    "description", "enum", "format", "maxItems", "minItems", "maxLength", "minLength",
    "maximum", "minimum", "maxProperties", "minProperties", "nullable", "pattern",
    "required", "title", "propertyOrdering", "default", "example",
}  # fmt: skip


def to_gemini_schema(schema: Any) -> Any:
    """A JSON Schema rewritten into Gemini's ``Schema``: upper-case types, ``nullable``.

    ``type: [X, "null"]`` becomes ``type: X, nullable: true``; ``properties``, ``items`` and
    ``anyOf`` are converted recursively; unsupported keywords are dropped.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {k: v for k, v in schema.items() if k in _SCHEMA_KEYS}
    kind = schema.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        if len(rest) < len(kind):
            out["nullable"] = True
        kind = rest[0] if rest else None
    if isinstance(kind, str):
        out["type"] = kind.upper()
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: to_gemini_schema(v) for k, v in schema["properties"].items()}
    if "items" in schema:
        out["items"] = to_gemini_schema(schema["items"])
    if isinstance(schema.get("anyOf"), list):
        out["anyOf"] = [to_gemini_schema(s) for s in schema["anyOf"]]
    if "const" in schema:
        out["enum"] = [schema["const"]]
    return out


#: Keywords ``responseJsonSchema`` does not take; everything else is JSON Schema as is.
_JSON_SCHEMA_DROP = frozenset({"$schema", "discriminator"})


def to_json_schema(schema: Any) -> Any:
    """A JSON Schema as ``responseJsonSchema`` takes it, structure untouched.

    ``const`` becomes a one-value ``enum`` (the form the API documents), recursively;
    ``$schema`` and OpenAPI's ``discriminator`` are dropped. ``$ref``/``$defs``, ``anyOf``,
    ``oneOf``, enums and ``additionalProperties`` pass through.
    """
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _JSON_SCHEMA_DROP:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key in ("properties", "$defs", "definitions", "patternProperties"):
            out[key] = (
                {k: to_json_schema(v) for k, v in value.items()}
                if isinstance(value, dict)
                else value
            )
        elif key in ("enum", "required", "default", "examples", "example"):
            out[key] = value  # values, not schemas
        else:
            out[key] = to_json_schema(value)
    return out


#: Google's documented stand-in for a function call that has no signature of this model's
#: (a conversation carried over from another model or vendor): Gemini 3 rejects such a
#: call's part without one ("Function call is missing a thought_signature").
SKIP_SIGNATURE = "skip_thought_signature_validator"
_NO_SIGNATURE_MODELS = ("gemini-1", "gemini-2")


def _call_parts(endpoint: EndpointConfig, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """``functionCall`` parts with their ``thoughtSignature``: this model's own, carried
    back verbatim; a foreign or missing one replaced, on the turn's first call, by
    :data:`SKIP_SIGNATURE` for models that require signatures (Gemini 3 and later)."""
    model = endpoint.model.rsplit("/", 1)[-1]
    needs = not model.startswith(_NO_SIGNATURE_MODELS)
    parts: list[dict[str, Any]] = []
    for i, c in enumerate(calls):
        part: dict[str, Any] = {"functionCall": {"name": c.name, "args": c.arguments}}
        own = carried(c.reasoning, endpoint)
        if own is not None and own.signature:
            part["thoughtSignature"] = own.signature
        elif needs and i == 0:
            part["thoughtSignature"] = SKIP_SIGNATURE
        parts.append(part)
    return parts


def _contents(endpoint: EndpointConfig, request: ChatRequest) -> list[dict[str, Any]]:
    names: dict[str, str] = {}  # tool_call_id -> function name, for functionResponse
    turns: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "tool":
            role = "user"
            try:
                response = json.loads(m.content)
            except ValueError:
                response = None
            if not isinstance(response, dict):
                response = {"content": m.content}
            name = m.tool_name or names.get(m.tool_call_id or "", "") or "tool"
            parts: list[dict[str, Any]] = [
                {"functionResponse": {"name": name, "response": response}}
            ]
        else:
            role = "model" if m.role == "assistant" else "user"
            parts = [{"text": m.content}] if m.content or not m.tool_calls else []
            for c in m.tool_calls:
                names[c.id] = c.name
            parts += _call_parts(endpoint, m.tool_calls)
        if turns and turns[-1]["role"] == role:
            turns[-1]["parts"].extend(parts)
        else:
            turns.append({"role": role, "parts": parts})
    if request.prefill:
        if turns and turns[-1]["role"] == "model":
            turns[-1]["parts"].append({"text": request.prefill})
        else:
            turns.append({"role": "model", "parts": [{"text": request.prefill}]})
    return turns


def build_body(endpoint: EndpointConfig, request: ChatRequest) -> dict[str, Any]:
    """The ``generateContent`` request body for ``request`` (same for streaming)."""
    config: dict[str, Any] = {
        "maxOutputTokens": min(request.max_tokens, endpoint.max_output_tokens)
    }
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.stop:
        config["stopSequences"] = request.stop
    if request.json_schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = to_json_schema(request.json_schema)
    body: dict[str, Any] = {"contents": _contents(endpoint, request), "generationConfig": config}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parameters": to_gemini_schema(t.parameters),
                    }
                    for t in request.tools
                ]
            }
        ]
        choice = request.tool_choice
        if choice is not None:
            mode = {"auto": "AUTO", "none": "NONE"}.get(choice, "ANY")
            calling: dict[str, Any] = {"mode": mode}
            if choice not in TOOL_CHOICE_MODES:
                calling["allowedFunctionNames"] = [choice]
            body["toolConfig"] = {"functionCallingConfig": calling}
    return body


def build_headers(key: str | None) -> dict[str, str]:
    """Headers of every call; the key goes only into ``x-goog-api-key`` (never the URL)."""
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["x-goog-api-key"] = key
    return headers


def url(endpoint: EndpointConfig, *, stream: bool) -> str:
    """The model's ``generateContent`` or ``streamGenerateContent?alt=sse`` URL."""
    base = f"{endpoint.base()}/v1beta/models/{endpoint.model}"
    return f"{base}:streamGenerateContent?alt=sse" if stream else f"{base}:generateContent"


class _Fold:
    """What one or more ``GenerateContentResponse`` objects add up to."""

    def __init__(self, call: Attempt) -> None:
        self.call = call
        self.calls: list[ToolCall] = []
        self.model: str | None = None
        self.finish_raw: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    def apply(self, payload: Any, partial: str) -> tuple[str, bool, bool]:
        """Fold one response; return (text delta, tool call seen, finish seen)."""
        if payload.get("error"):
            raise stream_error_event(
                payload["error"], endpoint=self.call.name, partial_text=partial
            )
        block = (payload.get("promptFeedback") or {}).get("blockReason")
        if block:
            raise ContentFilterError(
                f"prompt blocked (blockReason={block})",
                endpoint=self.call.name,
                status=200,
                partial_text=partial,
            )
        self.model = payload.get("modelVersion") or self.model
        usage = payload.get("usageMetadata")
        if isinstance(usage, dict) and "promptTokenCount" in usage:
            self.input_tokens = int(usage["promptTokenCount"])
            self.output_tokens = int(usage.get("candidatesTokenCount") or 0) + int(
                usage.get("thoughtsTokenCount") or 0
            )
        candidates = payload.get("candidates") or []
        if not candidates:
            return "", False, False
        candidate = candidates[0]
        text: list[str] = []
        tool_seen = False
        for part in (candidate.get("content") or {}).get("parts") or []:
            if part.get("thought"):
                continue
            if isinstance(part.get("text"), str):
                text.append(part["text"])
            if isinstance(part.get("functionCall"), dict):
                fc = part["functionCall"]
                call_id = fc.get("id") or f"call_{len(self.calls)}"
                call = parse_tool_arguments(call_id, fc.get("name", ""), fc.get("args"))
                if isinstance(part.get("thoughtSignature"), str):
                    sig = Reasoning(origin=self.call.origin, signature=part["thoughtSignature"])
                    call = call.model_copy(update={"reasoning": sig})
                self.calls.append(call)
                tool_seen = True
        reason = candidate.get("finishReason")
        delta = "".join(text)
        if reason and reason != "FINISH_REASON_UNSPECIFIED":
            self.finish_raw = reason
            self.finish(partial + delta)  # raises for blocked / malformed endings
            return delta, tool_seen, True
        return delta, tool_seen, False

    def finish(self, partial: str) -> FinishReason:
        """The normalized finish reason; raises for safety blocks and malformed calls."""
        reason = self.finish_raw or "STOP"
        kw: dict[str, Any] = {"endpoint": self.call.name, "status": 200, "partial_text": partial}
        if reason in _BLOCKED:
            raise ContentFilterError(f"output blocked (finishReason={reason})", **kw)
        if reason in _BAD_TOOL_CALL:
            raise MalformedToolCallError(f"the model's function call failed ({reason})", **kw)
        if reason not in _FINISH:
            raise MalformedStreamError(
                f"generation ended with finishReason={reason}, which is not a usable ending",
                **kw,
            )
        if self.calls and reason == "STOP":
            return FinishReason.TOOL_CALLS
        return _FINISH[reason]


def parse_reply(call: Attempt, payload: Any) -> ReplyParts:
    """Read a non-streaming ``generateContent`` response."""
    if not any(k in payload for k in ("candidates", "promptFeedback", "error")):
        raise MalformedStreamError("response has no candidates", endpoint=call.name, status=200)
    fold = _Fold(call)
    text, _, _ = fold.apply(payload, "")
    return ReplyParts(
        text=text,
        model=fold.model,
        finish=fold.finish(text),
        input_tokens=fold.input_tokens,
        output_tokens=fold.output_tokens,
        tool_calls=fold.calls,
    )


class GeminiStream(StreamState):
    """Folds the stream of ``GenerateContentResponse`` events."""

    def __init__(self, call: Attempt) -> None:
        super().__init__(call.name, call.prefix)
        self._fold = _Fold(call)

    def on_payload(self, event_name: str, payload: Any) -> None:
        """Apply one response object."""
        delta, tool_seen, finished = self._fold.apply(payload, self.text)
        self.add_text(delta)
        if tool_seen:
            self.content_events += 1
        self.model = self._fold.model
        self.input_tokens = self._fold.input_tokens
        self.output_tokens = self._fold.output_tokens
        if finished:
            self.finished = True
            self.finish = self._fold.finish(self.text)
            # Gemini sends final usage with the finishing chunk; if it did, stop now.
            self.done = isinstance(payload.get("usageMetadata"), dict)

    def tool_calls(self) -> list[ToolCall]:
        """Function calls of the stream, in order."""
        return list(self._fold.calls)


class GeminiWire(WireAdapter):
    """``generateContent``: ``x-goog-api-key`` auth, the model's method URL, SSE streams."""

    def headers(self, key: str | None, *, stream: bool) -> dict[str, str]:
        """:func:`build_headers`."""
        return build_headers(key)

    def body(self, endpoint: EndpointConfig, request: ChatRequest, *, stream: bool) -> Any:
        """:func:`build_body` (the same for streaming: the method says it)."""
        return build_body(endpoint, request)

    def url(self, endpoint: EndpointConfig, *, stream: bool) -> str:
        """:func:`url`."""
        return url(endpoint, stream=stream)

    def parse_reply(self, call: Attempt, payload: Any) -> ReplyParts:
        """:func:`parse_reply`."""
        return parse_reply(call, payload)

    def stream_state(self, call: Attempt) -> StreamState:
        """A :class:`GeminiStream`."""
        return GeminiStream(call)


WIRE = GeminiWire()
