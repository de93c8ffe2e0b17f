"""Classification at the provider boundary: status, body, headers, exceptions → one typed error.

Every function here is pure and total. :func:`classify_status` maps every status code
100-599 with any body and any headers to exactly one :class:`~resilience.errors.ProviderError`;
:func:`classify_exception` does the same for every exception an HTTP call can raise, by
the phase the call was in; :func:`classify_stream_end` for every way a stream can end;
:func:`stream_error_event` for an error object inside a 200 reply or stream. None of
them raises. The pieces they read are their own modules: the body's message, tags and
code (:mod:`providers.error_body`), cool-down hints in headers
(:mod:`providers.retry_after`), and each vendor's spellings (:mod:`providers.vendor_hints`:
AWS error types, Google's ``RetryInfo`` and per-day ``QuotaFailure``, the context-length
wordings with the window they state, so the health store can learn an endpoint's real
window). Those spellings are read on every route, whichever wire it speaks: gateways
and compatible servers mix them. An AWS error type decides before the status; Google's
403 ``BILLING_DISABLED`` is an exhausted quota; Azure's ``innererror`` codes
(``ResponsibleAIPolicyViolation``) are content filters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import httpx

from agent_failover.providers.error_body import (
    MAX_MESSAGE_CHARS,
    body_json,
    body_text,
    error_tags,
    provider_code,
    provider_message,
    scrub,
)
from agent_failover.providers.retry_after import parse_retry_after
from agent_failover.providers.vendor_hints import (
    AWS_TYPES,
    BAD_TOOL_CALL_WORDS,
    CONTENT_POLICY_WORDS,
    CONTEXT_WORDS,
    COOLING_WORDS,
    GEMINI_BAD_KEY_WORDS,
    MODEL_NOT_FOUND_WORDS,
    QUOTA_WORDS,
    aws_error_type,
    gemini_retry_delay,
    google_daily_quota,
    parse_context_limit,
)
from agent_failover.resilience.errors import (
    AuthError,
    ConnectError,
    ContentFilterError,
    ContextLengthError,
    Decision,
    InvalidRequestError,
    LocalSaturationError,
    MalformedStreamError,
    MalformedToolCallError,
    ModelNotFoundError,
    NoResponseError,
    OverloadedError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    ServerError,
    SlowFirstTokenError,
    StreamCutError,
    StreamErrorEvent,
    StreamStalledError,
)

#: Cool-down of an exhausted quota or spend limit when the provider names none: these do
#: not reset in seconds, and hammering a billing wall only burns the error budget.
DEFAULT_QUOTA_COOLDOWN_S = 3600.0


class Phase(StrEnum):
    """How far a call got when it failed: decides what a timeout or a reset means."""

    BEFORE_HEADERS = "before_headers"
    AWAITING_FIRST_TOKEN = "awaiting_first_token"
    STREAMING = "streaming"


class StreamEnd(StrEnum):
    """Every way a 200 stream can end."""

    COMPLETE = "complete"  # terminal event seen
    EOF_BEFORE_TERMINAL = "eof_before_terminal"  # the body ended without it
    FIRST_TOKEN_TIMEOUT = "first_token_timeout"  # ttft budget spent, no token yet
    IDLE_TIMEOUT = "idle_timeout"  # gap between chunks above the idle budget
    TOTAL_TIMEOUT = "total_timeout"  # total budget spent while tokens were flowing
    MALFORMED = "malformed"  # too many events that would not parse
    ERROR_EVENT = "error_event"  # the provider sent an error inside the stream


# -- status codes ------------------------------------------------------------------------


def _from_aws_type(
    kind: str, lowered: str, message: str, retry_after: float | None, kw: dict[str, Any]
) -> ProviderError | None:
    cls = AWS_TYPES.get(kind)
    if cls is None:
        return None
    if kind == "validationexception":
        if any(w in lowered for w in CONTEXT_WORDS):
            return _context_length(lowered, message, kw)
        if any(w in lowered for w in CONTENT_POLICY_WORDS):
            return ContentFilterError(f"blocked by content policy: {message}", **kw)
        if any(w in lowered for w in MODEL_NOT_FOUND_WORDS):
            return ModelNotFoundError(f"this route's model is not served: {message}", **kw)
    if cls is QuotaExhaustedError:
        cooldown = retry_after if retry_after is not None else DEFAULT_QUOTA_COOLDOWN_S
        return QuotaExhaustedError(
            f"quota exhausted ({kind}): {message}", retry_after=cooldown, **kw
        )
    if cls in (RateLimitedError, OverloadedError, ServerError):
        return cls(f"{kind}: {message}", retry_after=retry_after, **kw)
    return cls(f"{kind}: {message}", **kw)


def _too_many_requests(
    lowered: str, payload: Any, message: str, retry_after: float | None, kw: dict[str, Any]
) -> ProviderError:
    gemini_delay = gemini_retry_delay(payload)
    hinted = retry_after if retry_after is not None else gemini_delay
    daily = google_daily_quota(payload)
    if (
        "insufficient_quota" in lowered
        or daily
        or (gemini_delay is None and any(w in lowered for w in QUOTA_WORDS))
    ):
        return QuotaExhaustedError(
            f"quota or spend limit exhausted: {message}",
            retry_after=hinted if hinted is not None else DEFAULT_QUOTA_COOLDOWN_S,
            **kw,
        )
    return RateLimitedError(f"rate limited: {message}", retry_after=hinted, **kw)


def _context_length(text: str, message: str, kw: dict[str, Any]) -> ContextLengthError:
    """A context-length rejection, with the window and prompt size it states (if any)."""
    window, prompt = parse_context_limit(text)
    return ContextLengthError(
        f"request exceeds the context window: {message}",
        context_window=window,
        prompt_tokens=prompt,
        **kw,
    )


def _client_error(status: int, lowered: str, message: str, kw: dict[str, Any]) -> ProviderError:
    if status == 403 and "billing_disabled" in lowered:
        return QuotaExhaustedError(
            f"billing disabled: {message}", retry_after=DEFAULT_QUOTA_COOLDOWN_S, **kw
        )
    if status in (401, 403):
        return AuthError(f"rejected credentials: {message}", **kw)
    if status in (400, 413, 422) and any(w in lowered for w in CONTEXT_WORDS):
        return _context_length(lowered, message, kw)
    if status in (400, 422) and any(w in lowered for w in CONTENT_POLICY_WORDS):
        return ContentFilterError(f"blocked by content policy: {message}", **kw)
    if status == 400 and any(w in lowered for w in GEMINI_BAD_KEY_WORDS):
        # Gemini answers a bad key with 400 INVALID_ARGUMENT, not 401.
        return AuthError(f"rejected credentials: {message}", **kw)
    if status == 404 or (status == 400 and any(w in lowered for w in MODEL_NOT_FOUND_WORDS)):
        # The route names a model (or a URL) the provider does not serve: its configuration
        # is wrong, not the request, so another route may answer.
        return ModelNotFoundError(f"this route's model is not served: {message}", **kw)
    if status == 400 and "thought_signature" in lowered:
        # Gemini 3 wants its own signature on a call: a route of another model does not.
        return InvalidRequestError(f"request rejected: {message}", decision=Decision.FAILOVER, **kw)
    if status == 400 and any(w in lowered for w in BAD_TOOL_CALL_WORDS):
        return MalformedToolCallError(f"the model's tool call failed: {message}", **kw)
    if status == 413:
        return ContextLengthError(f"request too large: {message}", **kw)
    if status in (408, 409):
        # Transient by the official SDKs' own retry rules (request timeout, lock conflict).
        return ServerError(f"transient client-side status: {message}", **kw)
    return InvalidRequestError(f"request rejected: {message}", **kw)


def classify_status(
    status: int,
    body: bytes | str | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    endpoint: str,
    now: float | None,
) -> ProviderError:
    """The one typed error for an HTTP answer that is not a usable success.

    Total over every status 100-599 and any body/headers; never raises. Statuses that
    should not reach here (1xx, 2xx, 3xx: we never follow redirects) are a misbehaving
    route and fail over as :class:`ServerError`. An AWS error type decides before the
    status (Bedrock answers throttling and model-not-ready alike with 429).
    """
    text = body_text(body)
    lowered = text.lower()
    payload = body_json(text)
    tags = error_tags(payload)
    message = provider_message(text)
    retry_after = parse_retry_after(headers, now=now)
    kw: dict[str, Any] = {
        "endpoint": endpoint,
        "status": status,
        "provider_code": provider_code(payload),
    }

    aws = aws_error_type(headers, payload) if status >= 400 else None
    if aws is not None:
        mapped = _from_aws_type(aws, lowered, message, retry_after, kw)
        if mapped is not None:
            return mapped
    if status == 429:
        return _too_many_requests(lowered, payload, message, retry_after, kw)
    if 400 <= status < 500:
        return _client_error(status, lowered, message, kw)
    if 500 <= status < 600:
        if status in (503, 529) or "overloaded" in tags:
            return OverloadedError(f"overloaded: {message}", retry_after=retry_after, **kw)
        return ServerError(f"server error: {message}", retry_after=retry_after, **kw)
    return ServerError(
        f"unexpected HTTP status {status} (redirects are not followed): {message}",
        decision=Decision.FAILOVER,
        **kw,
    )


# -- exceptions --------------------------------------------------------------------------


def classify_exception(
    exc: BaseException,
    *,
    endpoint: str,
    phase: Phase = Phase.BEFORE_HEADERS,
    partial_text: str = "",
    now: float | None = None,
) -> ProviderError:
    """The one typed error for an exception raised while calling ``endpoint``.

    Total: a :class:`ProviderError` is returned unchanged; every httpx exception, builtin
    timeout and OS error maps by ``phase``; anything else is treated as a broken
    connection (before headers) or a cut stream (after). Never raises.
    """
    if isinstance(exc, ProviderError):
        return exc
    kw: dict[str, Any] = {"endpoint": endpoint, "partial_text": partial_text}
    what = f"{type(exc).__name__}: {scrub(str(exc))[:MAX_MESSAGE_CHARS]}".rstrip(": ")
    if isinstance(exc, httpx.HTTPStatusError):
        response = exc.response
        try:
            body: bytes | None = response.content
        except httpx.ResponseNotRead:
            body = None
        return classify_status(
            response.status_code, body, response.headers, endpoint=endpoint, now=now
        )
    before = phase is Phase.BEFORE_HEADERS
    if isinstance(exc, httpx.ConnectTimeout):
        # No connection within connect_s: the route is unreachable, same as refused.
        return ConnectError(f"connect timed out ({what})", **kw)
    if isinstance(exc, httpx.PoolTimeout):
        # No free connection in *our* pool: the request never left this process.
        return LocalSaturationError(f"no free connection in this worker's pool ({what})", **kw)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        if before:
            return NoResponseError(f"no response headers in time ({what})", **kw)
        if phase is Phase.AWAITING_FIRST_TOKEN:
            return SlowFirstTokenError(f"no first token in time ({what})", **kw)
        return StreamStalledError(f"stream stalled ({what})", **kw)
    if isinstance(exc, httpx.DecodingError) and not before:
        return MalformedStreamError(f"undecodable response body ({what})", **kw)
    if before:
        # Refused, reset, TLS failure, protocol error, bad URL, proxy failure: the route
        # gave no usable answer and another one may.
        return ConnectError(f"connection failed before a response ({what})", **kw)
    return StreamCutError(f"connection lost mid-response ({what})", **kw)


# -- stream endings ----------------------------------------------------------------------


def classify_stream_end(
    end: StreamEnd,
    *,
    endpoint: str,
    partial_text: str = "",
    detail: str = "",
    decision: Decision | None = None,
) -> ProviderError | None:
    """The error for how a 200 stream ended, or ``None`` when it completed properly."""
    kw: dict[str, Any] = {"endpoint": endpoint, "partial_text": partial_text, "status": 200}
    suffix = f": {detail}" if detail else ""
    match end:
        case StreamEnd.COMPLETE:
            return None
        case StreamEnd.EOF_BEFORE_TERMINAL:
            return StreamCutError(f"stream ended without its terminal event{suffix}", **kw)
        case StreamEnd.FIRST_TOKEN_TIMEOUT:
            return SlowFirstTokenError(f"no first token within the budget{suffix}", **kw)
        case StreamEnd.IDLE_TIMEOUT:
            return StreamStalledError(f"no chunk within the idle budget{suffix}", **kw)
        case StreamEnd.TOTAL_TIMEOUT:
            return StreamStalledError(f"total budget spent mid-stream{suffix}", **kw)
        case StreamEnd.MALFORMED:
            return MalformedStreamError(f"too many malformed events{suffix}", **kw)
        case StreamEnd.ERROR_EVENT:
            return StreamErrorEvent(f"error event in the stream{suffix}", decision=decision, **kw)


def stream_error_event(error: Any, *, endpoint: str, partial_text: str = "") -> StreamErrorEvent:
    """The error for an ``error`` event / ``{"error": ...}`` chunk inside a 200 stream."""
    if isinstance(error, dict):
        label = error.get("type") or error.get("status") or error.get("code") or "error"
        detail = f"{label}: {provider_message(json.dumps({'error': error}))}"
    else:
        detail = provider_message(str(error))
    return StreamErrorEvent(
        f"error event in the stream: {detail}",
        endpoint=endpoint,
        status=200,
        partial_text=partial_text,
        decision=error_event_decision(error),
        provider_code=provider_code({"error": error}),
    )


def error_event_decision(error: Any) -> Decision:
    """COOLDOWN for an overloaded / rate-limited error event, the class default otherwise.

    ``error`` is the event's error object: Anthropic ``{"type": "overloaded_error", ...}``,
    OpenAI ``{"type": ..., "code": ...}`` or Gemini ``{"code": 503, "status": "UNAVAILABLE"}``.
    """
    tags = error_tags({"error": error}) if isinstance(error, dict) else str(error).lower()
    if any(word in tags for word in COOLING_WORDS):
        return Decision.COOLDOWN
    return Decision.FAILOVER
