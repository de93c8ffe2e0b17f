"""The interface every wire format implements, the simulator's error value, SSE framing.

``SimError`` is a provider-neutral error (a category, a message, an optional status and
Retry-After); each wire format renders it with its provider's status code and body.
``error_from_fault`` turns a terminal fault into one, so the handler never needs to know
which provider it is talking as.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from agent_failover.resilience.endpoint import ProviderKind
from agent_failover.testing.sim.config import SimEndpoint
from agent_failover.testing.sim.content import ParsedRequest, Reply
from agent_failover.testing.sim.faults import Fault, FaultKind


class ErrorCategory(StrEnum):
    """What went wrong, independent of how a provider spells it."""

    RATE_LIMIT = "rate_limit"
    QUOTA = "quota"
    OVERLOADED = "overloaded"
    SERVER = "server"
    UNAVAILABLE = "unavailable"
    AUTH = "auth"
    PERMISSION = "permission"
    INVALID_REQUEST = "invalid_request"
    NOT_FOUND = "not_found"
    CONTEXT_LENGTH = "context_length"
    CONTENT_FILTER = "content_filter"


class SimError(Exception):
    """An error answer the simulator will render in the endpoint's wire format."""

    def __init__(
        self,
        category: ErrorCategory,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        param: str | None = None,
        detail: dict[str, Any] | None = None,
        reset_only: bool = False,
    ) -> None:
        super().__init__(message)
        self.detail = detail or {}
        self.category = category
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.param = param
        #: Say ``retry_after`` only in the vendor's rate-limit reset headers.
        self.reset_only = reset_only
        #: The server's clock when the error is answered (for reset timestamps).
        self.now = 0.0


_STATUS_CATEGORY = {
    401: ErrorCategory.AUTH,
    403: ErrorCategory.PERMISSION,
    404: ErrorCategory.NOT_FOUND,
    429: ErrorCategory.RATE_LIMIT,
    503: ErrorCategory.UNAVAILABLE,
    529: ErrorCategory.OVERLOADED,
}
_DEFAULT_MESSAGES = {
    ErrorCategory.RATE_LIMIT: "Rate limit reached; please slow down.",
    ErrorCategory.QUOTA: "You exceeded your current quota, please check your plan and billing.",
    ErrorCategory.OVERLOADED: "Overloaded",
    ErrorCategory.SERVER: "The server had an error while processing your request.",
    ErrorCategory.UNAVAILABLE: "The service is temporarily unavailable.",
    ErrorCategory.AUTH: "Invalid API key.",
    ErrorCategory.PERMISSION: "Your API key does not have permission to use this resource.",
    ErrorCategory.INVALID_REQUEST: "Invalid request.",
    ErrorCategory.NOT_FOUND: "Not found.",
    ErrorCategory.CONTENT_FILTER: "Output blocked by content filtering policy.",
}
_FAULT_CATEGORY = {
    FaultKind.RATE_LIMIT: ErrorCategory.RATE_LIMIT,
    FaultKind.QUOTA_EXHAUSTED: ErrorCategory.QUOTA,
    FaultKind.SERVER_ERROR: ErrorCategory.SERVER,
    FaultKind.UNAVAILABLE: ErrorCategory.UNAVAILABLE,
    FaultKind.OVERLOADED: ErrorCategory.OVERLOADED,
    FaultKind.AUTH_ERROR: ErrorCategory.AUTH,
    FaultKind.CONTENT_FILTER: ErrorCategory.CONTENT_FILTER,
}
_STREAM_ERROR_CATEGORY = {
    "overloaded": ErrorCategory.OVERLOADED,
    "server_error": ErrorCategory.SERVER,
    "rate_limit": ErrorCategory.RATE_LIMIT,
}


def category_for_status(status: int) -> ErrorCategory:
    """The category an arbitrary HTTP status falls in."""
    if status in _STATUS_CATEGORY:
        return _STATUS_CATEGORY[status]
    return ErrorCategory.SERVER if status >= 500 else ErrorCategory.INVALID_REQUEST


def error_from_fault(fault: Fault) -> SimError:
    """The error answer a terminal fault (not reset/hang/context) produces."""
    if fault.kind is FaultKind.HTTP_ERROR:
        assert fault.status is not None  # the Fault validator guarantees it
        category = category_for_status(fault.status)
        status: int | None = fault.status
    else:
        category = _FAULT_CATEGORY[fault.kind]
        status = None
    message = fault.message or _DEFAULT_MESSAGES[category]
    return SimError(
        category,
        message,
        status=status,
        retry_after=fault.retry_after,
        reset_only=fault.hint == "reset",
    )


def stream_error_from_fault(fault: Fault) -> SimError:
    """The error a ``stream_error_event`` fault puts inside a 200 stream."""
    category = _STREAM_ERROR_CATEGORY[fault.error_type]
    return SimError(category, fault.message or _DEFAULT_MESSAGES[category])


def context_error(prompt_tokens: int, window: int) -> SimError:
    """The error for a prompt that does not fit ``window`` (message text set per wire)."""
    return SimError(
        ErrorCategory.CONTEXT_LENGTH,
        f"prompt is too long: {prompt_tokens} tokens > {window} maximum",
        param="messages",
        detail={"prompt_tokens": prompt_tokens, "window": window},
    )


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


@dataclass(frozen=True)
class Operation:
    """What a request path asks for: a completion (maybe streamed) or the model list."""

    name: str  # "complete" or "models"
    path_model: str | None = None
    path_stream: bool | None = None  # Gemini encodes streaming in the path
    sse: bool = True
    variant: str | None = None  # which sub-API of a cloud wire (Vertex publisher, Bedrock API)


def reset_headers(style: str, seconds: float, now: float) -> dict[str, str]:
    """A rate-limit wait said only as the vendor says it in headers, by ``style``:
    ``openai`` (``x-ratelimit-reset-requests`` as a duration, remaining 0), ``anthropic``
    (``anthropic-ratelimit-requests-reset`` as an RFC 3339 time), ``azure``
    (``retry-after-ms``) or ``none`` (AWS and Google state no wait in a header)."""
    if style == "anthropic":
        at = datetime.fromtimestamp(now + seconds, tz=UTC).isoformat().replace("+00:00", "Z")
        return {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": at,
        }
    if style == "azure":
        return {"retry-after-ms": str(int(seconds * 1000))}
    if style == "none":
        return {}
    return {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": f"{seconds:g}s",
        "x-ratelimit-remaining-tokens": "1000",
        "x-ratelimit-reset-tokens": "0s",
    }


class WireFormat(ABC):
    """One provider's HTTP API, request parsing and response rendering."""

    kind: ProviderKind
    #: How a rate-limit wait is said when only the vendor's reset headers may say it
    #: (:func:`reset_headers`).
    reset_style = "openai"
    #: Content type of a streamed answer.
    stream_content_type = "text/event-stream; charset=utf-8"

    def for_operation(self, op: Operation) -> WireFormat:
        """The wire that parses and renders ``op`` (a cloud wire picks a sub-API)."""
        return self

    def auth_error(
        self, headers: Any, query: dict[str, str], endpoint: SimEndpoint, required: bool
    ) -> SimError | None:
        """Why the request's credentials are refused, or ``None`` to accept it."""
        if required and not self.authenticated(headers, query):
            return SimError(ErrorCategory.AUTH, "Missing or invalid API key.")
        return None

    @abstractmethod
    def route(self, method: str, tail: str, query: dict[str, str]) -> Operation | None:
        """Which operation ``method tail`` (path after ``/<endpoint>/``) is, if any."""

    @abstractmethod
    def authenticated(self, headers: Any, query: dict[str, str]) -> bool:
        """Whether the request carries this provider's API-key header."""

    @abstractmethod
    def parse(self, body: Any, op: Operation, endpoint: SimEndpoint) -> ParsedRequest:
        """Validate a request body; raise :class:`SimError` the way the provider would."""

    @abstractmethod
    def status_for(self, err: SimError) -> int:
        """The HTTP status this provider uses for ``err``."""

    @abstractmethod
    def error_body(self, err: SimError, status: int, model: str | None) -> dict[str, Any]:
        """The provider's JSON error body."""

    @abstractmethod
    def response(self, reply: Reply) -> dict[str, Any]:
        """The non-streaming response body."""

    @abstractmethod
    def stream_prelude(self, reply: Reply) -> list[bytes]:
        """Events before the first content piece."""

    @abstractmethod
    def stream_piece(self, reply: Reply, index: int, sent_tokens: int) -> bytes:
        """The event carrying ``reply.pieces[index]``."""

    @abstractmethod
    def stream_finale(self, reply: Reply, include_usage: bool) -> list[bytes]:
        """Events after the last piece (finish reason, usage), before the terminal marker."""

    @abstractmethod
    def stream_terminal(self) -> list[bytes]:
        """The terminal marker (``[DONE]``, ``message_stop``); empty when there is none."""

    def stream_trailer(self, reply: Reply) -> list[bytes]:
        """What ends a complete stream (withheld by ``no_done``): the terminal marker."""
        return self.stream_terminal()

    @abstractmethod
    def stream_error(self, err: SimError, model: str | None) -> bytes:
        """An error event inside a 200 stream."""

    @abstractmethod
    def malformed_event(self, reply: Reply) -> bytes:
        """A data line that is not valid JSON."""

    @abstractmethod
    def models(self, endpoint: SimEndpoint) -> dict[str, Any]:
        """The model-list body."""

    def request_id_header(self) -> str:
        """Name of the header the provider uses for its request id."""
        return "x-request-id"

    def error_headers(self, err: SimError) -> dict[str, str]:
        """Headers sent with an error answer (Retry-After when known)."""
        if err.retry_after is None:
            return {}
        if err.reset_only:
            return reset_headers(self.reset_style, err.retry_after, err.now)
        # Retry-After is whole seconds by RFC 9110; the ms variant keeps sub-second values.
        return {
            "retry-after": str(max(0, math.ceil(err.retry_after))),
            "retry-after-ms": str(int(err.retry_after * 1000)),
        }


def text_of_blocks(content: Any) -> str:
    """Concatenate text from a string or a list of typed blocks (the shape all three use)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out: list[str] = []
        for block in content:
            if isinstance(block, str):
                out.append(block)
            elif isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    out.append(block["text"])
                elif block.get("type") == "tool_result":
                    out.append(text_of_blocks(block.get("content")))
                elif block.get("type") == "tool_use":
                    out.append(json.dumps(block.get("input", {})))
                elif "functionCall" in block or "functionResponse" in block:
                    out.append(json.dumps(block))
        return "\n".join(out)
    raise SimError(
        ErrorCategory.INVALID_REQUEST,
        f"content must be a string or a list, got {type(content).__name__}",
    )
