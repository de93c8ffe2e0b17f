"""The Anthropic Messages API (``POST /v1/messages``), plain JSON and SSE.

Streams follow the documented event order: ``message_start``, ``content_block_start``,
``ping``, ``content_block_delta`` (``text_delta`` or, for a forced tool,
``input_json_delta``), ``content_block_stop``, ``message_delta`` (stop reason and output
usage), ``message_stop``. Errors are ``{"type":"error","error":{"type":...}}`` with 529
for overload. JSON mode is inferred the way callers ask Claude for JSON: a forced tool
(``tool_choice`` type ``tool``/``any``), an ``output_config.format`` (or beta
``output_format``) JSON schema, answered as JSON text matching it, or a system
prompt / last user message that asks for JSON. Tools offered with ``tool_choice`` auto (or
none) are called one by one, the first not yet called since the last user turn, before
the model answers: an agent loop.
"""

from __future__ import annotations

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

_ASKS_FOR_JSON = re.compile(r"\bjson\b", re.IGNORECASE)
_STOP_REASONS = {
    Finish.STOP: "end_turn",
    Finish.LENGTH: "max_tokens",
    Finish.TOOL: "tool_use",
    Finish.REFUSAL: "refusal",
}
_STATUS = {
    ErrorCategory.RATE_LIMIT: 429,
    ErrorCategory.QUOTA: 429,
    ErrorCategory.OVERLOADED: 529,
    ErrorCategory.SERVER: 500,
    ErrorCategory.UNAVAILABLE: 503,
    ErrorCategory.AUTH: 401,
    ErrorCategory.PERMISSION: 403,
    ErrorCategory.INVALID_REQUEST: 400,
    ErrorCategory.NOT_FOUND: 404,
    ErrorCategory.CONTEXT_LENGTH: 400,
    ErrorCategory.CONTENT_FILTER: 400,
}
_TYPES = {
    ErrorCategory.RATE_LIMIT: "rate_limit_error",
    ErrorCategory.QUOTA: "rate_limit_error",
    ErrorCategory.OVERLOADED: "overloaded_error",
    ErrorCategory.SERVER: "api_error",
    ErrorCategory.UNAVAILABLE: "api_error",
    ErrorCategory.AUTH: "authentication_error",
    ErrorCategory.PERMISSION: "permission_error",
    ErrorCategory.INVALID_REQUEST: "invalid_request_error",
    ErrorCategory.NOT_FOUND: "not_found_error",
    ErrorCategory.CONTEXT_LENGTH: "invalid_request_error",
    ErrorCategory.CONTENT_FILTER: "invalid_request_error",
}


def _invalid(message: str) -> SimError:
    return SimError(ErrorCategory.INVALID_REQUEST, message)


def _is_tool_results(content: Any) -> bool:
    """A user message made only of tool_result blocks answers tools; it is not a user turn."""
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _called_tools(messages: list[Any]) -> tuple[str, ...]:
    """Names of the tools the assistant called (tool_use blocks) since the last user turn."""
    called: list[str] = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if m.get("role") == "user" and not _is_tool_results(content):
            called = []
        elif m.get("role") == "assistant" and isinstance(content, list):
            called += [
                b["name"]
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_use" and "name" in b
            ]
    return tuple(called)


class AnthropicWire(WireFormat):
    """Anthropic Messages API."""

    #: How a rate-limit wait is said when only reset headers may say it.
    reset_style = "anthropic"

    kind = ProviderKind.ANTHROPIC

    def route(self, method: str, tail: str, query: dict[str, str]) -> Operation | None:
        """``POST v1/messages`` completes; ``GET v1/models`` lists models."""
        if method == "POST" and tail == "v1/messages":
            return Operation("complete")
        if method == "GET" and tail == "v1/models":
            return Operation("models")
        return None

    def authenticated(self, headers: Any, query: dict[str, str]) -> bool:
        """Anthropic takes the key in ``x-api-key`` (or a bearer token)."""
        return bool(headers.get("x-api-key") or headers.get("authorization"))

    def request_id_header(self) -> str:
        """Anthropic's request id header."""
        return "request-id"

    def parse(self, body: Any, op: Operation, endpoint: SimEndpoint) -> ParsedRequest:
        """Validate a Messages request the way the API does (required fields first)."""
        if not isinstance(body, dict):
            raise _invalid("request body must be a JSON object")
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                raise _invalid(f"{name}: Field required")
        max_tokens = body["max_tokens"]
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise _invalid("max_tokens: Input should be a valid integer greater than 0")
        raw_messages = body["messages"]
        if not isinstance(raw_messages, list) or not raw_messages:
            raise _invalid("messages: at least one message is required")
        messages: list[tuple[str, str]] = []
        for i, m in enumerate(raw_messages):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
                raise _invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            messages.append((m["role"], text_of_blocks(m.get("content"))))
        system = text_of_blocks(body.get("system"))
        tool, offered = self._tool_choice(body)
        schema = None
        # Structured outputs: ``output_config.format`` (GA) or the beta ``output_format``.
        output_config = body.get("output_config")
        output_format = (
            output_config.get("format") if isinstance(output_config, dict) else None
        ) or body.get("output_format")
        if isinstance(output_format, dict) and output_format.get("type") == "json_schema":
            schema = output_format.get("schema") or {"type": "object"}
        last_user = next((t for r, t in reversed(messages) if r == "user"), "")
        json_mode = (
            tool is not None
            or schema is not None
            or bool(_ASKS_FOR_JSON.search(system) or _ASKS_FOR_JSON.search(last_user))
        )
        return ParsedRequest(
            model=str(body["model"]),
            messages=messages,
            system=system,
            max_tokens=max_tokens,
            stream=bool(body.get("stream", False)),
            json_mode=json_mode,
            schema=schema,
            tool=tool,
            offered_tools=offered,
            called_tools=_called_tools(raw_messages) if offered else (),
        )

    @staticmethod
    def _tool_choice(body: dict[str, Any]) -> tuple[ForcedTool | None, tuple[ForcedTool, ...]]:
        """(the forced tool, the tools the model may call on its own) for the request."""
        tools = [
            ForcedTool(t["name"], t.get("input_schema") or {"type": "object"})
            for t in body.get("tools") or []
            if isinstance(t, dict) and "name" in t
        ]
        choice = body.get("tool_choice") or {"type": "auto"}
        if not tools or not isinstance(choice, dict) or choice.get("type") == "none":
            return None, ()
        if choice.get("type") == "tool":
            wanted = choice.get("name")
            match = next((t for t in tools if t.name == wanted), None)
            if match is None:
                raise _invalid(f"tool_choice: tool '{wanted}' is not among the provided tools")
            return match, ()
        if choice.get("type") == "any":
            called = _called_tools(body["messages"])
            return first_uncalled(tools, called) or tools[0], ()
        return None, tuple(tools)

    def status_for(self, err: SimError) -> int:
        """Anthropic's status for ``err`` (529 for overload)."""
        return err.status or _STATUS[err.category]

    def error_body(self, err: SimError, status: int, model: str | None) -> dict[str, Any]:
        """``{"type":"error","error":{"type":...,"message":...}}``."""
        kind = _TYPES[err.category]
        if status == 413:
            kind = "request_too_large"
        elif status == 504:
            kind = "timeout_error"
        return {"type": "error", "error": {"type": kind, "message": err.message}}

    def _content_block(self, reply: Reply, *, empty: bool) -> dict[str, Any]:
        if reply.tool is not None:
            return {
                "type": "tool_use",
                "id": reply.tool_call_id,
                "name": reply.tool.name,
                "input": {} if empty else reply.tool_input,
            }
        return {"type": "text", "text": "" if empty else reply.text}

    def _message(self, reply: Reply, *, streaming: bool) -> dict[str, Any]:
        if streaming:
            content: list[dict[str, Any]] = []
        elif reply.text == "" and reply.tool is None:
            content = []
        else:
            content = [self._content_block(reply, empty=False)]
        return {
            "id": reply.id,
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": content,
            "stop_reason": None if streaming else _STOP_REASONS[reply.finish],
            "stop_sequence": None,
            "usage": {
                "input_tokens": reply.input_tokens,
                "output_tokens": 1 if streaming else reply.output_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    def response(self, reply: Reply) -> dict[str, Any]:
        """A complete ``message`` object."""
        return self._message(reply, streaming=False)

    # The stream as (event name, payload) pairs; stream_* frame them as SSE, and the
    # Bedrock InvokeModel wire frames the same payloads as event-stream chunks.
    def prelude_events(self, reply: Reply) -> list[tuple[str, dict[str, Any]]]:
        """``message_start``, ``content_block_start``, ``ping``."""
        return [
            (
                "message_start",
                {"type": "message_start", "message": self._message(reply, streaming=True)},
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": self._content_block(reply, empty=True),
                },
            ),
            ("ping", {"type": "ping"}),
        ]

    def piece_event(self, reply: Reply, index: int) -> tuple[str, dict[str, Any]]:
        """One ``content_block_delta``."""
        piece = reply.pieces[index]
        if reply.tool is not None:
            delta = {"type": "input_json_delta", "partial_json": piece}
        else:
            delta = {"type": "text_delta", "text": piece}
        return "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}

    def finale_events(self, reply: Reply) -> list[tuple[str, dict[str, Any]]]:
        """``content_block_stop`` then ``message_delta`` with the stop reason and usage."""
        return [
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": _STOP_REASONS[reply.finish], "stop_sequence": None},
                    "usage": {"output_tokens": reply.output_tokens},
                },
            ),
        ]

    def stream_prelude(self, reply: Reply) -> list[bytes]:
        """``message_start``, ``content_block_start``, ``ping``."""
        return [sse(data, name) for name, data in self.prelude_events(reply)]

    def stream_piece(self, reply: Reply, index: int, sent_tokens: int) -> bytes:
        """One ``content_block_delta``."""
        name, data = self.piece_event(reply, index)
        return sse(data, name)

    def stream_finale(self, reply: Reply, include_usage: bool) -> list[bytes]:
        """``content_block_stop`` then ``message_delta`` with the stop reason and usage."""
        return [sse(data, name) for name, data in self.finale_events(reply)]

    def stream_terminal(self) -> list[bytes]:
        """``message_stop``."""
        return [sse({"type": "message_stop"}, "message_stop")]

    def stream_error(self, err: SimError, model: str | None) -> bytes:
        """An ``error`` event, as Anthropic sends when it overloads mid-stream."""
        return sse(self.error_body(err, self.status_for(err), model), "error")

    def malformed_event(self, reply: Reply) -> bytes:
        """A ``content_block_delta`` whose JSON is cut off."""
        return (
            b"event: content_block_delta\n"
            b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_de\n\n'
        )

    def models(self, endpoint: SimEndpoint) -> dict[str, Any]:
        """The ``GET /v1/models`` page."""
        data = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2025-09-29T00:00:00Z"}
            for m in endpoint.models
        ]
        return {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"],
            "last_id": data[-1]["id"],
        }
