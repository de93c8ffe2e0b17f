"""The OpenAI Chat Completions API (``POST /v1/chat/completions``), JSON and SSE.

Also serves every OpenAI-compatible endpoint (the ``cheap-mini`` Mistral route). Streams
are ``chat.completion.chunk`` objects: a role chunk, content deltas, a chunk with the
finish reason, a usage chunk with empty ``choices`` when ``stream_options.include_usage``
is set, then ``data: [DONE]``. Errors are ``{"error":{"message","type","code","param"}}``
with the codes clients branch on: ``rate_limit_exceeded`` vs ``insufficient_quota``,
``context_length_exceeded``, ``content_policy_violation``. JSON mode comes from
``response_format`` (``json_object`` or ``json_schema``) or a forced function tool. Tools
offered with ``tool_choice`` auto (or none) are called one by one, the first not yet called
since the last user message, before the model answers: an agent loop.
"""

from __future__ import annotations

import json
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

_FINISH = {
    Finish.STOP: "stop",
    Finish.LENGTH: "length",
    Finish.TOOL: "tool_calls",
    Finish.REFUSAL: "content_filter",
}
_STATUS = {
    ErrorCategory.RATE_LIMIT: 429,
    ErrorCategory.QUOTA: 429,
    ErrorCategory.OVERLOADED: 503,
    ErrorCategory.SERVER: 500,
    ErrorCategory.UNAVAILABLE: 503,
    ErrorCategory.AUTH: 401,
    ErrorCategory.PERMISSION: 403,
    ErrorCategory.INVALID_REQUEST: 400,
    ErrorCategory.NOT_FOUND: 404,
    ErrorCategory.CONTEXT_LENGTH: 400,
    ErrorCategory.CONTENT_FILTER: 400,
}
# (type, code) per category, as the API reports them
_TYPE_CODE: dict[ErrorCategory, tuple[str, str | None]] = {
    ErrorCategory.RATE_LIMIT: ("requests", "rate_limit_exceeded"),
    ErrorCategory.QUOTA: ("insufficient_quota", "insufficient_quota"),
    ErrorCategory.OVERLOADED: ("server_error", "overloaded"),
    ErrorCategory.SERVER: ("server_error", None),
    ErrorCategory.UNAVAILABLE: ("server_error", "service_unavailable"),
    ErrorCategory.AUTH: ("invalid_request_error", "invalid_api_key"),
    ErrorCategory.PERMISSION: ("invalid_request_error", "unsupported_country_region_territory"),
    ErrorCategory.INVALID_REQUEST: ("invalid_request_error", None),
    ErrorCategory.NOT_FOUND: ("invalid_request_error", "model_not_found"),
    ErrorCategory.CONTEXT_LENGTH: ("invalid_request_error", "context_length_exceeded"),
    ErrorCategory.CONTENT_FILTER: ("invalid_request_error", "content_policy_violation"),
}


def _invalid(message: str, param: str | None = None) -> SimError:
    return SimError(ErrorCategory.INVALID_REQUEST, message, param=param)


def _called_tools(messages: list[Any]) -> tuple[str, ...]:
    """Names of the functions the assistant called since the last user message."""
    called: list[str] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "user":
            called = []
        elif m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                name = (call.get("function") or {}).get("name") if isinstance(call, dict) else None
                if isinstance(name, str):
                    called.append(name)
    return tuple(called)


class OpenAIWire(WireFormat):
    """OpenAI (and OpenAI-compatible) Chat Completions."""

    kind = ProviderKind.OPENAI

    def route(self, method: str, tail: str, query: dict[str, str]) -> Operation | None:
        """``POST v1/chat/completions`` completes; ``GET v1/models`` lists models."""
        if method == "POST" and tail == "v1/chat/completions":
            return Operation("complete")
        if method == "GET" and tail == "v1/models":
            return Operation("models")
        return None

    def authenticated(self, headers: Any, query: dict[str, str]) -> bool:
        """OpenAI takes ``Authorization: Bearer <key>``."""
        return str(headers.get("authorization", "")).lower().startswith("bearer ")

    def parse(self, body: Any, op: Operation, endpoint: SimEndpoint) -> ParsedRequest:
        """Validate a Chat Completions request."""
        if not isinstance(body, dict):
            raise _invalid("We could not parse the JSON body of your request.")
        if "model" not in body:
            raise _invalid("you must provide a model parameter", "model")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise _invalid("'messages' must be a non-empty array", "messages")
        system_parts: list[str] = []
        messages: list[tuple[str, str]] = []
        for i, m in enumerate(raw):
            role = m.get("role") if isinstance(m, dict) else None
            if role not in ("system", "developer", "user", "assistant", "tool"):
                raise _invalid(f"Invalid value for 'messages[{i}].role'", f"messages.[{i}].role")
            text = text_of_blocks(m.get("content"))
            if role == "assistant" and m.get("tool_calls"):
                text += json.dumps(m["tool_calls"])
            if role in ("system", "developer"):
                system_parts.append(text)
            else:
                messages.append((role, text))
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise _invalid("max_tokens must be a positive integer", "max_tokens")
        json_mode, schema = False, None
        fmt = body.get("response_format")
        if isinstance(fmt, dict):
            if fmt.get("type") == "json_object":
                json_mode = True
            elif fmt.get("type") == "json_schema":
                json_mode = True
                schema = (fmt.get("json_schema") or {}).get("schema") or {"type": "object"}
        tool, offered = self._tool_choice(body)
        options = body.get("stream_options") or {}
        return ParsedRequest(
            model=str(body["model"]),
            messages=messages or [("user", "")],
            system="\n".join(system_parts),
            max_tokens=max_tokens or endpoint.max_output_tokens,
            stream=bool(body.get("stream", False)),
            include_usage=bool(options.get("include_usage"))
            if isinstance(options, dict)
            else False,
            json_mode=json_mode or tool is not None,
            schema=schema,
            tool=tool,
            offered_tools=offered,
            called_tools=_called_tools(raw) if offered else (),
        )

    @staticmethod
    def _tool_choice(body: dict[str, Any]) -> tuple[ForcedTool | None, tuple[ForcedTool, ...]]:
        """(the forced tool, the tools the model may call on its own) for the request."""
        tools = [
            ForcedTool(t["function"]["name"], t["function"].get("parameters") or {"type": "object"})
            for t in body.get("tools") or []
            if isinstance(t, dict) and isinstance(t.get("function"), dict)
        ]
        choice = body.get("tool_choice")
        if not tools or choice == "none":
            return None, ()
        if isinstance(choice, dict) and choice.get("type") == "function":
            wanted = (choice.get("function") or {}).get("name")
            match = next((t for t in tools if t.name == wanted), None)
            if match is None:
                raise _invalid(f"Invalid tool_choice: no function named '{wanted}'", "tool_choice")
            return match, ()
        if choice == "required":
            called = _called_tools(body.get("messages") or [])
            return first_uncalled(tools, called) or tools[0], ()
        return None, tuple(tools)

    def status_for(self, err: SimError) -> int:
        """OpenAI's status for ``err`` (503 for overload)."""
        return err.status or _STATUS[err.category]

    def error_body(self, err: SimError, status: int, model: str | None) -> dict[str, Any]:
        """``{"error":{"message","type","code","param"}}``."""
        kind, code = _TYPE_CODE[err.category]
        message = err.message
        if err.category is ErrorCategory.CONTEXT_LENGTH:
            message = (
                f"This model's maximum context length is {err.detail.get('window')} tokens. "
                f"However, your messages resulted in {err.detail.get('prompt_tokens')} tokens. "
                "Please reduce the length of the messages."
            )
        elif err.category is ErrorCategory.NOT_FOUND and model:
            message = f"The model `{model}` does not exist or you do not have access to it."
        return {"error": {"message": message, "type": kind, "param": err.param, "code": code}}

    def _tool_call(self, reply: Reply, arguments: str) -> dict[str, Any]:
        assert reply.tool is not None
        return {
            "id": reply.tool_call_id,
            "type": "function",
            "function": {"name": reply.tool.name, "arguments": arguments},
        }

    def _usage(self, reply: Reply) -> dict[str, Any]:
        return {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        }

    def response(self, reply: Reply) -> dict[str, Any]:
        """A ``chat.completion`` object."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
        if reply.tool is not None:
            message["content"] = None
            message["tool_calls"] = [self._tool_call(reply, reply.text)]
        return {
            "id": reply.id,
            "object": "chat.completion",
            "created": reply.created,
            "model": reply.model,
            "system_fingerprint": "fp_sim",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": _FINISH[reply.finish],
                }
            ],
            "usage": self._usage(reply),
        }

    def _chunk(self, reply: Reply, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": reply.id,
            "object": "chat.completion.chunk",
            "created": reply.created,
            "model": reply.model,
            "system_fingerprint": "fp_sim",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def stream_prelude(self, reply: Reply) -> list[bytes]:
        """The role chunk (with the tool call header for a forced tool)."""
        delta: dict[str, Any] = {"role": "assistant", "content": "", "refusal": None}
        if reply.tool is not None:
            delta["content"] = None
            delta["tool_calls"] = [{"index": 0, **self._tool_call(reply, "")}]
        return [sse(self._chunk(reply, delta, None))]

    def stream_piece(self, reply: Reply, index: int, sent_tokens: int) -> bytes:
        """One content (or tool-arguments) delta chunk."""
        piece = reply.pieces[index]
        if reply.tool is not None:
            delta: dict[str, Any] = {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
        else:
            delta = {"content": piece}
        return sse(self._chunk(reply, delta, None))

    def stream_finale(self, reply: Reply, include_usage: bool) -> list[bytes]:
        """The finish-reason chunk, then the usage chunk when asked for."""
        events = [sse(self._chunk(reply, {}, _FINISH[reply.finish]))]
        if include_usage:
            usage_chunk = self._chunk(reply, {}, None)
            usage_chunk["choices"] = []
            usage_chunk["usage"] = self._usage(reply)
            events.append(sse(usage_chunk))
        return events

    def stream_terminal(self) -> list[bytes]:
        """``data: [DONE]``."""
        return [sse("[DONE]")]

    def stream_error(self, err: SimError, model: str | None) -> bytes:
        """A data line holding an ``error`` object (the SDK raises ``APIError`` on it)."""
        return sse(self.error_body(err, self.status_for(err), model))

    def malformed_event(self, reply: Reply) -> bytes:
        """A chunk whose JSON is cut off mid-string."""
        return (
            f'data: {{"id":"{reply.id}","object":"chat.completion.chunk",'
            '"choices":[{"index":0,"delta":{"content":"trunc\n\n'
        ).encode()

    def models(self, endpoint: SimEndpoint) -> dict[str, Any]:
        """The ``GET /v1/models`` list."""
        return {
            "object": "list",
            "data": [
                {
                    "id": m,
                    "object": "model",
                    "created": 1_700_000_000,
                    "owned_by": endpoint.organisation,
                }
                for m in endpoint.models
            ],
        }
