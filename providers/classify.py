"""Classification at the provider boundary: status, body, headers, exceptions → one typed error.

Every function here is pure and total. :func:`classify_status` maps every status code
100-599 with any body and any headers to exactly one :class:`~resilience.errors.ProviderError`;
:func:`classify_exception` does the same for every exception an HTTP call can raise, by
the phase the call was in; :func:`classify_stream_end` for every way a stream can end.
None of them raises. Cool-down hints are read from ``retry-after-ms``, ``retry-after``
(seconds or HTTP-date, relative to the ``now`` argument), OpenAI's
``x-ratelimit-reset-*`` durations and Anthropic's ``anthropic-ratelimit-*-reset``
timestamps, and Gemini's ``RetryInfo.retryDelay`` in the error body. A context-length
rejection carries the window the provider states (:func:`parse_context_limit`), so the
health store can learn an endpoint's real window.

The clouds add their own spellings, read before the status: AWS names its error in the
``x-amzn-ErrorType`` header or the body's ``__type`` (Bedrock's ``ThrottlingException``
is a rate limit, ``ServiceUnavailableException`` / ``ModelNotReadyException`` an
overload, ``ServiceQuotaExceededException`` an exhausted quota, a
``ValidationException`` about input length a context-length error); Google's 429
carrying a per-day ``QuotaFailure`` is an exhausted quota rather than a rate limit, and
a 403 ``BILLING_DISABLED`` too; Azure's ``innererror`` codes
(``ResponsibleAIPolicyViolation``) are content filters.

Error messages quote at most :data:`MAX_MESSAGE_CHARS` of the provider's own message, with
anything shaped like an API key masked: providers echo keys back in 401 bodies.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

import httpx

from agent_failover.resilience.errors import (
    AuthError,
    ConnectError,
    ContentFilterError,
    ContextLengthError,
    Decision,
    InvalidRequestError,
    MalformedStreamError,
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

#: Longest provider message quoted in an error.
MAX_MESSAGE_CHARS = 300
#: Longest cool-down any header may ask for; a far-future date is a bug, not a plan.
MAX_RETRY_AFTER_S = 24 * 3600.0
#: Cool-down of an exhausted quota or spend limit when the provider names none: these do
#: not reset in seconds, and hammering a billing wall only burns the error budget.
DEFAULT_QUOTA_COOLDOWN_S = 3600.0

_CONTEXT_WORDS = (
    "context_length_exceeded",
    "prompt is too long",
    "exceeds the maximum number of tokens",
    "maximum context length",
    "context window",
    "request_too_large",
    # Bedrock's ValidationException spellings
    "input is too long",
    "too many input tokens",
    "exceed context limit",
)
# Anthropic's output classifier answers 400 "Output blocked by content filtering policy".
_CONTENT_POLICY_WORDS = (
    "content_policy_violation",
    "content_filter",
    "content filtering policy",
    "responsibleaipolicy",
)
_QUOTA_WORDS = (
    "insufficient_quota",
    "spend limit",
    "spending limit",
    "credit balance",
    "billing",
)
_GEMINI_BAD_KEY_WORDS = ("api_key_invalid", "api key not valid", "api key expired")
_DAILY_QUOTA_WORDS = ("perday", "per_day", "per day")
# AWS error types (x-amzn-ErrorType / __type) by the class they map to; ValidationException
# is read from its message (context length, content filter, or a plain bad request).
_AWS_TYPES: dict[str, type[ProviderError]] = {
    "throttlingexception": RateLimitedError,
    "toomanyrequestsexception": RateLimitedError,
    "servicequotaexceededexception": QuotaExhaustedError,
    "serviceunavailableexception": OverloadedError,
    "modelnotreadyexception": OverloadedError,
    "internalserverexception": ServerError,
    "modeltimeoutexception": ServerError,
    "modelerrorexception": ServerError,
    "modelstreamerrorexception": ServerError,
    "accessdeniedexception": AuthError,
    "unrecognizedclientexception": AuthError,
    "expiredtokenexception": AuthError,
    "invalidsignatureexception": AuthError,
    "incompletesignatureexception": AuthError,
    "missingauthenticationtokenexception": AuthError,
    "resourcenotfoundexception": InvalidRequestError,
    "validationexception": InvalidRequestError,
}
_SECRET_RE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,}|AIza[0-9A-Za-z_\-]{10,}|[A-Za-z0-9_\-]{40,})")
_NUM = r"(\d[\d,]*)"
_IS = re.I | re.S
# (pattern, group of the window, group of the prompt size or 0): the wording of each
# provider's context-length rejection, most specific first.
_CONTEXT_LIMIT_RES: tuple[tuple[re.Pattern[str], int, int], ...] = (
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    (re.compile(rf"prompt is too long:\s*{_NUM}\s*tokens\s*>\s*{_NUM}\s*maximum", re.I), 2, 1),
    # Anthropic: "input length and `max_tokens` exceed context limit: 197779 + 8192 > 200000"
    (re.compile(rf"exceed context limit:\s*{_NUM}\s*\+\s*{_NUM}\s*>\s*{_NUM}", re.I), 3, 1),
    # Gemini: "The input token count (1200000) exceeds the maximum number of tokens
    # allowed (1048576)."
    (
        re.compile(
            rf"input token count\s*\(?{_NUM}\)?\s*exceeds the maximum number of tokens"
            rf" allowed\s*\(?{_NUM}\)?",
            re.I,
        ),
        2,
        1,
    ),
    # Mistral: "Prompt contains 40000 tokens ... too large for model with 32768 maximum
    # context length"
    (re.compile(rf"prompt contains {_NUM} tokens.*?with {_NUM} maximum context", _IS), 2, 1),
    # OpenAI / vLLM / DeepSeek: "This model's maximum context length is 128000 tokens.
    # However, your messages resulted in 150000 tokens."
    (re.compile(rf"maximum context length is {_NUM} tokens.*?resulted in {_NUM}", _IS), 1, 2),
    (re.compile(rf"maximum context length is {_NUM} tokens.*?{_NUM} in the messages", _IS), 1, 2),
    (re.compile(rf"maximum context length is {_NUM} tokens", re.I), 1, 0),
)
#: Windows outside this range in a rejection are misreadings, not limits.
_WINDOW_RANGE = (256, 100_000_000)
_GO_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


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


# -- retry hints -------------------------------------------------------------------------


def parse_go_duration(value: str) -> float | None:
    """Seconds in an OpenAI reset header: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"``."""
    text = value.strip()
    if not text:
        return None
    pos = 0
    total = 0.0
    for match in _GO_DURATION_RE.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _GO_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        return None
    return total


def _seconds_until(value: str, now: float | None) -> float | None:
    """Seconds from ``now`` to an HTTP-date or an RFC 3339 timestamp."""
    if now is None:
        return None
    text = value.strip()
    when: datetime | None = None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # HTTP-dates are GMT by definition
    try:
        return when.timestamp() - now
    except (OverflowError, OSError, ValueError):
        return None


def _finite_float(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _clamp(seconds: float | None) -> float | None:
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None) -> float | None:
    """Seconds to wait before this route may be tried again, from response headers.

    Precedence: ``retry-after-ms``, then ``retry-after`` (delta-seconds or HTTP-date),
    then the vendor reset headers. Of the vendor resets, the one whose ``remaining``
    counter is 0 wins (that is the limit actually hit); when none is known to be 0, the
    longest one (the conservative choice). Negative values clamp to 0, absurd ones to
    :data:`MAX_RETRY_AFTER_S`. ``now`` (epoch seconds) is needed only for dates.
    """
    h = _lower(headers)
    if "retry-after-ms" in h:
        ms = _finite_float(h["retry-after-ms"])
        if ms is not None:
            return _clamp(ms / 1000.0)
    if "retry-after" in h:
        raw = h["retry-after"]
        seconds = _finite_float(raw)
        if seconds is None:
            seconds = _seconds_until(raw, now)
        if seconds is not None:
            return _clamp(seconds)
    hit: list[float] = []
    known: list[float] = []
    for kind in ("requests", "tokens"):
        reset = h.get(f"x-ratelimit-reset-{kind}")
        if reset is None:
            continue
        seconds = parse_go_duration(reset)
        if seconds is None:
            seconds = _finite_float(reset)
        if seconds is None:
            continue
        known.append(seconds)
        if h.get(f"x-ratelimit-remaining-{kind}", "").strip() == "0":
            hit.append(seconds)
    for kind in ("requests", "tokens", "input-tokens", "output-tokens"):
        reset = h.get(f"anthropic-ratelimit-{kind}-reset")
        if reset is None:
            continue
        seconds = _seconds_until(reset, now)
        if seconds is None:
            continue
        known.append(seconds)
        if h.get(f"anthropic-ratelimit-{kind}-remaining", "").strip() == "0":
            hit.append(seconds)
    chosen = hit or known
    return _clamp(max(chosen)) if chosen else None


def _gemini_retry_delay(payload: Any) -> float | None:
    """``error.details[].retryDelay`` ("37s") of a Gemini RESOURCE_EXHAUSTED body."""
    error = payload.get("error") if isinstance(payload, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return None
    for item in details:
        if isinstance(item, dict) and isinstance(item.get("retryDelay"), str):
            seconds = parse_go_duration(item["retryDelay"])
            if seconds is not None:
                return _clamp(seconds)
    return None


def parse_context_limit(text: str) -> tuple[int | None, int | None]:
    """``(window, prompt_tokens)`` stated in a context-length rejection; None where unsaid.

    Covers OpenAI and OpenAI-compatible servers ("maximum context length is N tokens"),
    Anthropic ("prompt is too long: P tokens > N maximum", "exceed context limit: P + O >
    N"), Gemini ("input token count (P) exceeds the maximum number of tokens allowed (N)")
    and Mistral ("Prompt contains P tokens ... with N maximum context length"). Total:
    never raises; a number outside a plausible window range is ignored.
    """
    for pattern, window_group, prompt_group in _CONTEXT_LIMIT_RES:
        m = pattern.search(text)
        if m is None:
            continue
        window = int(m.group(window_group).replace(",", ""))
        prompt = int(m.group(prompt_group).replace(",", "")) if prompt_group else None
        if not _WINDOW_RANGE[0] <= window <= _WINDOW_RANGE[1]:
            return None, prompt
        return window, prompt
    return None, None


# -- bodies ------------------------------------------------------------------------------


def _lower(headers: Mapping[str, str] | None) -> dict[str, str]:
    if not headers:
        return {}
    items = headers.multi_items() if isinstance(headers, httpx.Headers) else headers.items()
    return {str(k).lower(): str(v) for k, v in items}


def _decode(body: bytes | str | None) -> str:
    if body is None:
        return ""
    if isinstance(body, bytes):
        return body.decode("utf-8", errors="replace")
    return str(body)


def _json(text: str) -> Any:
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        return None
    # Gemini sometimes wraps its error object in a one-element list.
    if isinstance(payload, list) and payload and isinstance(payload[0], dict):
        return payload[0]
    return payload


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with the given secrets and anything shaped like an API key masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return _SECRET_RE.sub("[redacted]", text)


def provider_message(body: bytes | str | None) -> str:
    """A short, key-free human message from an error body (JSON error object or plain text)."""
    text = _decode(body)
    payload = _json(text)
    message: Any = None
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            message = error.get("message") or error.get("type") or error.get("status")
        elif isinstance(error, str):
            message = error
    if not isinstance(message, str) or not message:
        message = text
    message = " ".join(message.split())
    return scrub(message)[:MAX_MESSAGE_CHARS] or "(empty body)"


def _error_tags(payload: Any) -> str:
    """Machine-readable error tags (type, code, status) of a JSON body, lower-cased."""
    if not isinstance(payload, dict):
        return ""
    error = payload.get("error")
    inner = error.get("innererror") if isinstance(error, dict) else None
    parts: list[str] = []
    for source in (error, inner, payload):
        if isinstance(source, dict):
            for key in ("type", "code", "status", "reason"):
                value = source.get(key)
                if isinstance(value, str | int) and not isinstance(value, bool):
                    parts.append(str(value).lower())
    return " ".join(parts)


def provider_code(payload: Any) -> str | None:
    """The provider's own error code of a JSON error body, as it spelled it, if any.

    Anthropic ``{"error": {"type": "overloaded_error"}}``, OpenAI ``{"error": {"code":
    "insufficient_quota", "type": ...}}``, Gemini ``{"error": {"status": "UNAVAILABLE"}}``.
    """
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    for source in (error, payload):
        if isinstance(source, dict):
            for key in ("code", "type", "status"):
                value = source.get(key)
                if isinstance(value, str) and value and len(value) <= 100:
                    return value
    return None


# -- status codes ------------------------------------------------------------------------


def aws_error_type(headers: Mapping[str, str] | None, payload: Any) -> str | None:
    """The AWS error name of a response (``ThrottlingException``), lower-cased, if any.

    botocore reads ``x-amzn-ErrorType`` (``Name:http://…``) first, then the body's
    ``__type`` (``com.amazon.coral…#Name``), then ``code``; so do we.
    """
    raw = _lower(headers).get("x-amzn-errortype")
    if not raw and isinstance(payload, dict):
        for key in ("__type", "code"):
            if isinstance(payload.get(key), str) and payload.get(key):
                raw = payload[key]
                break
    if not raw:
        return None
    name = raw.split(":", 1)[0].rsplit("#", 1)[-1].strip().lower()
    return name or None


def _google_daily_quota(payload: Any) -> bool:
    """A Google 429 whose ``QuotaFailure`` / ``ErrorInfo`` names a per-day limit."""
    error = payload.get("error") if isinstance(payload, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return False
    text = json.dumps(details).lower()
    return ("quotafailure" in text or "errorinfo" in text) and any(
        w in text for w in _DAILY_QUOTA_WORDS
    )


def _from_aws_type(
    kind: str, lowered: str, message: str, retry_after: float | None, kw: dict[str, Any]
) -> ProviderError | None:
    cls = _AWS_TYPES.get(kind)
    if cls is None:
        return None
    if kind == "validationexception":
        if any(w in lowered for w in _CONTEXT_WORDS):
            return _context_length(lowered, message, kw)
        if any(w in lowered for w in _CONTENT_POLICY_WORDS):
            return ContentFilterError(f"blocked by content policy: {message}", **kw)
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
    gemini_delay = _gemini_retry_delay(payload)
    hinted = retry_after if retry_after is not None else gemini_delay
    daily = _google_daily_quota(payload)
    if (
        "insufficient_quota" in lowered
        or daily
        or (gemini_delay is None and any(w in lowered for w in _QUOTA_WORDS))
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
    if status in (400, 413, 422) and any(w in lowered for w in _CONTEXT_WORDS):
        return _context_length(lowered, message, kw)
    if status in (400, 422) and any(w in lowered for w in _CONTENT_POLICY_WORDS):
        return ContentFilterError(f"blocked by content policy: {message}", **kw)
    if status == 400 and any(w in lowered for w in _GEMINI_BAD_KEY_WORDS):
        # Gemini answers a bad key with 400 INVALID_ARGUMENT, not 401.
        return AuthError(f"rejected credentials: {message}", **kw)
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
    text = _decode(body)
    lowered = text.lower()
    payload = _json(text)
    tags = _error_tags(payload)
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
    tags = _error_tags({"error": error}) if isinstance(error, dict) else str(error).lower()
    cooling = (
        "overloaded",
        "rate_limit",
        "resource_exhausted",
        "unavailable",  # also Bedrock's serviceUnavailableException
        "throttl",  # Bedrock's throttlingException
        "modelnotready",
        "429",
        "503",
        "529",
    )
    if any(word in tags for word in cooling):
        return Decision.COOLDOWN
    return Decision.FAILOVER
