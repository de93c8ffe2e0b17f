"""How each vendor spells its errors, read from any route's answer.

The clouds and vendors add their own spellings to HTTP statuses: AWS names its error
in the ``x-amzn-ErrorType`` header or the body's ``__type`` (Bedrock's
``ThrottlingException`` is a rate limit, ``ServiceUnavailableException`` /
``ModelNotReadyException`` an overload, ``ServiceQuotaExceededException`` an exhausted
quota, a ``ValidationException`` about input length a context-length error); Google's
429 carries ``RetryInfo.retryDelay`` and, for a per-day limit, a ``QuotaFailure``; each
vendor words its context-length rejection differently and most state the window
(:func:`parse_context_limit`). :mod:`providers.classify` reads all of them on every
route, since gateways and compatible servers mix them. Pure and total.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from agent_failover.providers.error_body import lower_headers
from agent_failover.providers.retry_after import clamp, parse_go_duration
from agent_failover.resilience.errors import (
    AuthError,
    InvalidRequestError,
    ModelNotFoundError,
    OverloadedError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    ServerError,
)

CONTEXT_WORDS = (
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
CONTENT_POLICY_WORDS = (
    "content_policy_violation",
    "content_filter",
    "content filtering policy",
    "responsibleaipolicy",
)
QUOTA_WORDS = (
    "insufficient_quota",
    "spend limit",
    "spending limit",
    "credit balance",
    "billing",
)
# A model id the provider does not serve, in a 400 (a 404 says it by its status): Bedrock's
# ValidationException "The provided model identifier is invalid.", OpenAI's and compatible
# servers' ``model_not_found`` / "The model `x` does not exist", Anthropic's not_found_error.
MODEL_NOT_FOUND_WORDS = (
    "model_not_found",
    "model identifier is invalid",
    "invalid model identifier",
    "invalid model id",
    "unknown model",
    "model not found",
    "not_found_error",
)
# Groq's 400 when the model's own tool call did not parse: the reply carries it in
# ``failed_generation``; the same failure streamed is a malformed tool call.
BAD_TOOL_CALL_WORDS = ("tool_use_failed", "failed_generation")
GEMINI_BAD_KEY_WORDS = ("api_key_invalid", "api key not valid", "api key expired")
DAILY_QUOTA_WORDS = ("perday", "per_day", "per day")
# AWS error types (x-amzn-ErrorType / __type) by the class they map to; ValidationException
# is read from its message (context length, content filter, or a plain bad request).
AWS_TYPES: dict[str, type[ProviderError]] = {
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
    "resourcenotfoundexception": ModelNotFoundError,
    "validationexception": InvalidRequestError,
}
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

#: Words of an in-stream error object that mean "busy, come back later" (COOLDOWN).
COOLING_WORDS = (
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


def aws_error_type(headers: Mapping[str, str] | None, payload: Any) -> str | None:
    """The AWS error name of a response (``ThrottlingException``), lower-cased, if any.

    botocore reads ``x-amzn-ErrorType`` (``Name:http://…``) first, then the body's
    ``__type`` (``com.amazon.coral…#Name``), then ``code``; so do we.
    """
    raw = lower_headers(headers).get("x-amzn-errortype")
    if not raw and isinstance(payload, dict):
        for key in ("__type", "code"):
            if isinstance(payload.get(key), str) and payload.get(key):
                raw = payload[key]
                break
    if not raw:
        return None
    name = raw.split(":", 1)[0].rsplit("#", 1)[-1].strip().lower()
    return name or None


def google_daily_quota(payload: Any) -> bool:
    """A Google 429 whose ``QuotaFailure`` / ``ErrorInfo`` names a per-day limit."""
    error = payload.get("error") if isinstance(payload, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return False
    text = json.dumps(details).lower()
    return ("quotafailure" in text or "errorinfo" in text) and any(
        w in text for w in DAILY_QUOTA_WORDS
    )


def gemini_retry_delay(payload: Any) -> float | None:
    """``error.details[].retryDelay`` ("37s") of a Gemini RESOURCE_EXHAUSTED body."""
    error = payload.get("error") if isinstance(payload, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return None
    for item in details:
        if isinstance(item, dict) and isinstance(item.get("retryDelay"), str):
            seconds = parse_go_duration(item["retryDelay"])
            if seconds is not None:
                return clamp(seconds)
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
