"""Reading a provider's error answer: its body as text and JSON, its message, tags and code.

Pure and total helpers shared by classification (:mod:`providers.classify`) and the
credential store (:mod:`providers.auth`): nothing here raises on any body. The message
quoted in an error is at most :data:`MAX_MESSAGE_CHARS` of the provider's own words,
with anything shaped like an API key masked: providers echo keys back in 401 bodies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import httpx

#: Longest provider message quoted in an error.
MAX_MESSAGE_CHARS = 300

_SECRET_RE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,}|AIza[0-9A-Za-z_\-]{10,}|[A-Za-z0-9_\-]{40,})")


def lower_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """Response headers with lower-cased names (the last of repeated ones wins)."""
    if not headers:
        return {}
    items = headers.multi_items() if isinstance(headers, httpx.Headers) else headers.items()
    return {str(k).lower(): str(v) for k, v in items}


def body_text(body: bytes | str | None) -> str:
    """An error body as text (undecodable bytes replaced)."""
    if body is None:
        return ""
    if isinstance(body, bytes):
        return body.decode("utf-8", errors="replace")
    return str(body)


def body_json(text: str) -> Any:
    """The JSON value of an error body, or ``None`` when it is not JSON."""
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
    text = body_text(body)
    payload = body_json(text)
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


def error_tags(payload: Any) -> str:
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
