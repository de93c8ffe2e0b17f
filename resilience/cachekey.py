"""The response-cache key: equal for requests that would get the same answer.

The key is a SHA-256 over the role and a normalized form of the request: every text has
its whitespace runs collapsed and ends trimmed (so a reformatted prompt still hits),
JSON is dumped with sorted keys, and fields that change how a reply is delivered or
trimmed but not what it says are left out (``stream``, per-message ``priority``).
Generation parameters (``max_tokens``, ``temperature``, ``stop``, ``json_schema``,
``prefill``) stay in, because they change the answer. ``CACHE_KEY_VERSION`` is hashed
too, so a change to the normalization invalidates old entries instead of colliding.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from agent_failover.resilience.models import ChatRequest, Message

CACHE_KEY_VERSION = 1
_WS = re.compile(r"\s+")


def normalize_text(text: str | None) -> str | None:
    """Collapse whitespace runs to one space and trim; None stays None."""
    if text is None:
        return None
    return _WS.sub(" ", text).strip()


def _message(m: Message) -> dict[str, Any]:
    return {
        "role": m.role,
        "content": normalize_text(m.content),
        "tool_call_id": m.tool_call_id,
        "tool_name": m.tool_name,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
        ],
    }


def normalized_request(role: str, request: ChatRequest) -> dict[str, Any]:
    """The canonical structure that :func:`cache_key` hashes (useful when debugging misses)."""
    return {
        "v": CACHE_KEY_VERSION,
        "role": role,
        "system": normalize_text(request.system),
        "messages": [_message(m) for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stop": list(request.stop),
        "json_schema": request.json_schema,
        "prefill": normalize_text(request.prefill),
    }


#: ``json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False,
#: default=str)``, built once: ``json.dumps`` builds an encoder per call for these options.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def cache_key(role: str, request: ChatRequest) -> str:
    """Hex SHA-256 of ``role`` plus the normalized request (stream flag and priorities excluded)."""
    payload = _ENCODER.encode(normalized_request(role, request))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
