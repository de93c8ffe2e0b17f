"""The Gemini API (``models/{model}:generateContent`` and ``:streamGenerateContent``).

Responses carry ``candidates[{content:{parts:[{text}],role:"model"},finishReason}]``,
``usageMetadata`` and ``modelVersion``. With ``?alt=sse`` the stream is one
``GenerateContentResponse`` per SSE ``data:`` line, usage growing as it goes and the last
one carrying ``finishReason``; without it the same objects come back as one JSON array,
as the REST API does. Gemini has no terminal marker, so a cut stream is only visible as
a missing ``finishReason``. Errors are ``{"error":{"code","message","status"}}``, with a
``RetryInfo`` detail when a retry delay is known. JSON mode is
``generationConfig.responseMimeType = application/json`` with an optional
``responseSchema`` (OpenAPI subset) or ``responseJsonSchema``. Gemini 3 models
(``gemini-3*``) require, as the real API does, a ``thoughtSignature`` on the first
``functionCall`` part of every model step of the current turn, and answer 400
INVALID_ARGUMENT "Function call is missing a thought_signature" without one; their
``functionCall`` parts carry one. Tools are ``functionDeclarations``
(``parametersJsonSchema`` or ``parameters``); ``toolConfig.functionCallingConfig.mode``
``ANY`` forces a call (of ``allowedFunctionNames``), ``NONE`` forbids one, and otherwise
declared functions are called one by one, as the other wires do.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_failover.resilience.endpoint import ProviderKind
from agent_failover.testing.sim.config import SimEndpoint
from agent_failover.testing.sim.content import (
    Finish,
    ForcedTool,
    ParsedRequest,
    Reply,
    first_uncalled,
)
from agent_failover.testing.sim.wire.base import (
    ErrorCategory,
    Operation,
    SimError,
    WireFormat,
    sse,
    text_of_blocks,
)

_PATH = re.compile(
    r"^v1(?:beta)?/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)
_FINISH = {
    Finish.STOP: "STOP",
    Finish.LENGTH: "MAX_TOKENS",
    Finish.TOOL: "STOP",
    Finish.REFUSAL: "SAFETY",
}


def _finish(reply: Reply) -> str:
    """The reply's ``finishReason``: a fault may name the refusal (Vertex ``MODEL_ARMOR``)."""
    if reply.finish is Finish.REFUSAL and reply.refusal_reason:
        return reply.refusal_reason
    return _FINISH[reply.finish]


_STATUS: dict[ErrorCategory, tuple[int, str]] = {
    ErrorCategory.RATE_LIMIT: (429, "RESOURCE_EXHAUSTED"),
    ErrorCategory.QUOTA: (429, "RESOURCE_EXHAUSTED"),
    ErrorCategory.OVERLOADED: (503, "UNAVAILABLE"),
    ErrorCategory.SERVER: (500, "INTERNAL"),
    ErrorCategory.UNAVAILABLE: (503, "UNAVAILABLE"),
    ErrorCategory.AUTH: (401, "UNAUTHENTICATED"),
    ErrorCategory.PERMISSION: (403, "PERMISSION_DENIED"),
    ErrorCategory.INVALID_REQUEST: (400, "INVALID_ARGUMENT"),
    ErrorCategory.NOT_FOUND: (404, "NOT_FOUND"),
    ErrorCategory.CONTEXT_LENGTH: (400, "INVALID_ARGUMENT"),
    ErrorCategory.CONTENT_FILTER: (400, "INVALID_ARGUMENT"),
}
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _invalid(message: str) -> SimError:
    return SimError(ErrorCategory.INVALID_REQUEST, message)


def _lower_types(schema: Any) -> Any:
    """An OpenAPI-subset schema (``type: OBJECT``) read as JSON Schema."""
    if isinstance(schema, list):
        return [_lower_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _lower_types(v) for k, v in schema.items()}
    if isinstance(out.get("type"), str):
        out["type"] = out["type"].lower()
    return out


def _called(contents: list[Any]) -> tuple[str, ...]:
    """Functions the model called since the last user text."""
    called: list[str] = []
    for c in contents:
        parts = [p for p in c.get("parts") or [] if isinstance(p, dict)]
        if c.get("role", "user") == "user" and any("text" in p for p in parts):
            called = []
        elif c.get("role") == "model":
            called += [p["functionCall"].get("name", "") for p in parts if "functionCall" in p]
    return tuple(called)


def _tools(body: dict[str, Any]) -> tuple[ForcedTool | None, tuple[ForcedTool, ...]]:
    """(the forced function, the functions the model may call on its own)."""
    tools = [
        ForcedTool(
            str(d.get("name", "")),
            d.get("parametersJsonSchema")
            or _lower_types(d.get("parameters"))
            or {"type": "object"},
        )
        for group in body.get("tools") or []
        if isinstance(group, dict)
        for d in _get(group, "functionDeclarations", "function_declarations") or []
        if isinstance(d, dict)
    ]
    config = (
        _get(
            body.get("toolConfig") or body.get("tool_config") or {},
            "functionCallingConfig",
            "function_calling_config",
        )
        or {}
    )
    mode = str(config.get("mode", "AUTO")).upper()
    if not tools or mode == "NONE":
        return None, ()
    if mode == "ANY":
        allowed = _get(config, "allowedFunctionNames", "allowed_function_names") or []
        pool = [t for t in tools if t.name in allowed] or tools
        return first_uncalled(pool, _called(body["contents"])) or pool[0], ()
    return None, tuple(tools)


def _signature(reply: Reply) -> str | None:
    """The opaque signature a Gemini 3 model puts on its function call."""
    return f"sim-sig-{reply.id}" if reply.model.startswith("gemini-3") else None


def _call_part(reply: Reply) -> dict[str, Any]:
    """The reply's function call as a whole part (Gemini never streams call arguments)."""
    assert reply.tool is not None
    try:
        args = json.loads(reply.text)
    except ValueError:
        args = {}
    part: dict[str, Any] = {"functionCall": {"name": reply.tool.name, "args": args}}
    signature = _signature(reply)
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def missing_signature(model: str, contents: list[Any]) -> str | None:
    """Gemini 3's rule: the error message when a model step of the current turn (since the
    last user text) has a first ``functionCall`` part without ``thoughtSignature``."""
    if not model.startswith("gemini-3"):
        return None
    start = 0
    for i, c in enumerate(contents):
        parts = c.get("parts") or []
        if c.get("role", "user") == "user" and any("text" in p for p in parts):
            start = i + 1
    for c in contents[start:]:
        if c.get("role") != "model":
            continue
        calls = [p for p in c.get("parts") or [] if isinstance(p, dict) and "functionCall" in p]
        if calls and not calls[0].get("thoughtSignature"):
            name = calls[0]["functionCall"].get("name", "")
            return (
                "Function call is missing a thought_signature in functionCall parts. This is "
                "required for tools to work correctly, and missing thought_signature may lead "
                f"to degraded model performance. Additional data, function call `{name}`."
            )
    return None


def _get(d: dict[str, Any], camel: str, snake: str) -> Any:
    # The REST API accepts proto field names in both spellings.
    return d.get(camel, d.get(snake))


class GeminiWire(WireFormat):
    """Google Gemini generateContent."""

    #: How a rate-limit wait is said when only reset headers may say it.
    reset_style = "none"

    kind = ProviderKind.GEMINI

    def route(self, method: str, tail: str, query: dict[str, str]) -> Operation | None:
        """``POST v1beta/models/{model}:(stream)GenerateContent``; ``GET v1beta/models``."""
        if method == "GET" and tail in ("v1beta/models", "v1/models"):
            return Operation("models")
        m = _PATH.match(tail)
        if method != "POST" or m is None:
            return None
        streaming = m.group("method") == "streamGenerateContent"
        return Operation(
            "complete",
            path_model=m.group("model"),
            path_stream=streaming,
            sse=query.get("alt") == "sse",
        )

    def authenticated(self, headers: Any, query: dict[str, str]) -> bool:
        """Gemini takes ``x-goog-api-key`` or ``?key=``."""
        return bool(headers.get("x-goog-api-key") or query.get("key"))

    def parse(self, body: Any, op: Operation, endpoint: SimEndpoint) -> ParsedRequest:
        """Validate a GenerateContentRequest."""
        if not isinstance(body, dict):
            raise _invalid("Invalid JSON payload received.")
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise _invalid("* GenerateContentRequest.contents: contents is not specified")
        messages: list[tuple[str, str]] = []
        for i, c in enumerate(contents):
            if not isinstance(c, dict) or not isinstance(c.get("parts"), list):
                raise _invalid(f"* GenerateContentRequest.contents[{i}].parts: must be a list")
            role = {"model": "assistant", "function": "tool"}.get(c.get("role", "user"), "user")
            messages.append((role, text_of_blocks(c["parts"])))
        problem = missing_signature(op.path_model or endpoint.default_model, contents)
        if problem is not None:
            raise _invalid(problem)
        system_inst = _get(body, "systemInstruction", "system_instruction") or {}
        system = text_of_blocks(system_inst.get("parts")) if isinstance(system_inst, dict) else ""
        config = _get(body, "generationConfig", "generation_config") or {}
        max_tokens = _get(config, "maxOutputTokens", "max_output_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise _invalid(
                "* GenerateContentRequest.generation_config.max_output_tokens: must be positive"
            )
        mime = _get(config, "responseMimeType", "response_mime_type") or "text/plain"
        schema = _get(config, "responseJsonSchema", "response_json_schema") or _get(
            config, "responseSchema", "response_schema"
        )
        json_mode = mime == "application/json"
        tool, offered = _tools(body)
        return ParsedRequest(
            model=op.path_model or endpoint.default_model,
            messages=messages,
            system=system,
            max_tokens=max_tokens or endpoint.max_output_tokens,
            stream=bool(op.path_stream),
            include_usage=True,
            json_mode=json_mode or tool is not None,
            schema=schema if json_mode and isinstance(schema, dict) else None,
            tool=tool,
            offered_tools=offered,
            called_tools=_called(contents) if offered else (),
        )

    def status_for(self, err: SimError) -> int:
        """Gemini's status for ``err`` (503 for overload)."""
        return err.status or _STATUS[err.category][0]

    def error_body(self, err: SimError, status: int, model: str | None) -> dict[str, Any]:
        """``{"error":{"code","message","status"}}`` plus RetryInfo when known."""
        name = _STATUS_NAMES.get(status) or _STATUS[err.category][1]
        message = err.message
        if err.category is ErrorCategory.CONTEXT_LENGTH:
            message = (
                f"The input token count ({err.detail.get('prompt_tokens')}) exceeds the maximum "
                f"number of tokens allowed ({err.detail.get('window')})."
            )
        elif err.category is ErrorCategory.NOT_FOUND and model:
            message = f"models/{model} is not found for API version v1beta."
        error: dict[str, Any] = {"code": status, "message": message, "status": name}
        if err.retry_after is not None:
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{err.retry_after:g}s",
                }
            ]
        return {"error": error}

    def _usage(self, reply: Reply, output_tokens: int) -> dict[str, Any]:
        return {
            "promptTokenCount": reply.input_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": reply.input_tokens + output_tokens,
        }

    def _response(
        self, reply: Reply, text: str | None, finish: str | None, output_tokens: int
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model"}, "index": 0}
        if reply.tool is not None and finish is not None:
            candidate["content"]["parts"] = [_call_part(reply)]
        elif text is not None and reply.tool is None:
            candidate["content"]["parts"] = [{"text": text}]
        if finish is not None:
            candidate["finishReason"] = finish
        if finish == "SAFETY":
            candidate["safetyRatings"] = [
                {
                    "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                    "probability": "HIGH",
                    "blocked": True,
                }
            ]
        return {
            "candidates": [candidate],
            "usageMetadata": self._usage(reply, output_tokens),
            "modelVersion": reply.model,
            "responseId": reply.id,
        }

    def response(self, reply: Reply) -> dict[str, Any]:
        """A complete GenerateContentResponse (no ``parts`` when the output is empty)."""
        text = reply.text if reply.text else None
        return self._response(reply, text, _finish(reply), reply.output_tokens)

    def stream_prelude(self, reply: Reply) -> list[bytes]:
        """Gemini sends nothing before the first content."""
        return []

    def stream_piece(self, reply: Reply, index: int, sent_tokens: int) -> bytes:
        """One GenerateContentResponse with a text part and running usage."""
        return sse(self._response(reply, reply.pieces[index], None, sent_tokens))

    def stream_finale(self, reply: Reply, include_usage: bool) -> list[bytes]:
        """The last response: ``finishReason`` and the final usage."""
        return [sse(self._response(reply, "", _finish(reply), reply.output_tokens))]

    def stream_terminal(self) -> list[bytes]:
        """Gemini has no terminal marker."""
        return []

    def stream_error(self, err: SimError, model: str | None) -> bytes:
        """An ``error`` object on a data line."""
        return sse(self.error_body(err, self.status_for(err), model))

    def malformed_event(self, reply: Reply) -> bytes:
        """A response whose JSON is cut off."""
        return b'data: {"candidates":[{"content":{"parts":[{"text":"trunc\n\n'

    def models(self, endpoint: SimEndpoint) -> dict[str, Any]:
        """The ``GET v1beta/models`` list."""
        return {
            "models": [
                {
                    "name": f"models/{m}",
                    "displayName": m,
                    "inputTokenLimit": endpoint.context_window,
                    "outputTokenLimit": endpoint.max_output_tokens,
                    "supportedGenerationMethods": ["generateContent", "streamGenerateContent"],
                }
                for m in endpoint.models
            ]
        }
