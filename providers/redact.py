"""Credential redaction for anything printed: headers, URLs, free text (log lines).

Pure functions, no IO. The chaos proxy uses :func:`redact_headers` and
:func:`redact_target` on what it prints; the worker's logging filter
(:class:`agent_failover.logs.RedactSecrets`) runs :func:`redact_text` over every record,
so a Gemini ``?key=`` in an httpx request line or an ``Authorization`` header in a
DEBUG dump never reaches the terminal or the log shipper.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode

#: Header and query names that carry credentials, whatever the provider.
SECRET_NAMES = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "api_key",
        "x-goog-api-key",
        "x-amz-security-token",
        "ocp-apim-subscription-key",
        "cookie",
        "set-cookie",
        "key",
        "sig",
    }
)
_SECRET_PATTERN = re.compile(r"key|token|secret|auth|signature|credential|password|cookie", re.I)
REDACTED = "<redacted>"
#: ``?name=value`` / ``&name=value`` pairs inside free text (a URL in a log line).
_QUERY_PAIR = re.compile(r"(?P<sep>[?&;])(?P<name>[A-Za-z0-9_.\-]+)=(?P<value>[^&#\s\"'<>]*)")
#: Header names whose value is a credential, as they appear in header dumps.
_HEADER_NAMES = (
    "proxy-authorization",
    "authorization",
    "x-goog-api-key",
    "x-api-key",
    "api-key",
    "x-amz-security-token",
    "ocp-apim-subscription-key",
    "set-cookie",
    "cookie",
)
#: ``Authorization: Bearer x``, ``'authorization': 'Bearer x'``, ``(b'x-api-key', b'x')``.
_HEADER_VALUE = re.compile(
    r"(?P<head>(?<![\w-])(?:" + "|".join(map(re.escape, _HEADER_NAMES)) + r")['\"]?"
    r"\s*[:=,]\s*b?['\"]?)(?P<value>[^'\"\r\n,;}\])]+)",
    re.I,
)
#: Values shaped like a provider key even where no name announces them.
_KEY_SHAPED = re.compile(r"\b(?:sk-[A-Za-z0-9_\-]{6,}|AIza[0-9A-Za-z_\-]{10,})")
#: Shorter secret values are not replaced verbatim: they would mask ordinary words.
MIN_SECRET_VALUE_LEN = 8


def is_secret(name: str) -> bool:
    """Whether a header or query parameter named ``name`` may carry a credential."""
    return name.lower() in SECRET_NAMES or bool(_SECRET_PATTERN.search(name))


def redact_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers with every credential-bearing value replaced by ``<redacted>``."""
    return [(k, REDACTED if is_secret(k) else v) for k, v in headers]


def redact_target(path: str, query_string: str) -> str:
    """``path?query`` with credential-bearing query values (Gemini's ``key=``) hidden."""
    if not query_string:
        return path
    pairs = parse_qsl(query_string, keep_blank_values=True)
    safe = [(k, REDACTED if is_secret(k) else v) for k, v in pairs]
    return f"{path}?{urlencode(safe, safe='<>')}"


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with secret query values, secret header values, key-shaped tokens and the
    literal ``secrets`` (at least :data:`MIN_SECRET_VALUE_LEN` characters) replaced."""
    for secret in secrets:
        if len(secret) >= MIN_SECRET_VALUE_LEN and secret in text:
            text = text.replace(secret, REDACTED)
    text = _QUERY_PAIR.sub(_query_pair, text)
    text = _HEADER_VALUE.sub(lambda m: m["head"] + REDACTED, text)
    return _KEY_SHAPED.sub(REDACTED, text)


def _query_pair(m: re.Match[str]) -> str:
    if not m["value"] or m["value"] == REDACTED or not is_secret(m["name"]):
        return m[0]
    return f"{m['sep']}{m['name']}={REDACTED}"
