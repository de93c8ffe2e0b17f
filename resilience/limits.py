"""Size limits on everything that enters workflow history, and the helpers that keep them.

Temporal rejects any payload above 2 MB (``limit.blobSize.error``) and a gRPC message above
4 MB. A workflow task whose command carries a bigger payload fails and is retried forever,
and an activity whose result or failure is too big cannot even report: it times out and is
retried on the same route. So every value that crosses into history is bounded here, once:

* a model reply: the role's ``max_reply_bytes`` (enforced at the provider boundary, as the
  error class ``oversized_output``); :data:`MAX_REPLY_BYTES_LIMIT` caps the setting so a
  ``call_model`` result (text plus the parsed JSON) stays under the payload limit;
* a request scheduled as a ``call_model`` input: :data:`MAX_REQUEST_BYTES` (triaged down by
  :func:`agent_failover.resilience.triage.bound_request_bytes` before it is scheduled);
* text carried by a failure or a heartbeat: the last :data:`PARTIAL_TEXT_TAIL_CHARS`
  characters (:func:`tail`), and messages of at most :data:`MAX_FAILURE_MESSAGE_CHARS`.

Pure: no IO, no Temporal.
"""

from __future__ import annotations

#: Temporal's default per-payload error limit (server ``limit.blobSize.error``).
TEMPORAL_PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024
#: Largest ``max_reply_bytes`` a role may set: a ``call_model`` result carries the text and
#: its parsed JSON (about twice the reply), which must stay under the payload limit.
MAX_REPLY_BYTES_LIMIT = 768 * 1024
#: Largest request scheduled as one ``call_model`` input (the schema and tools ride along).
MAX_REQUEST_BYTES = 1024 * 1024
#: Partial text kept in a failure's details or a heartbeat: the tail, where it stopped.
PARTIAL_TEXT_TAIL_CHARS = 4096
#: Longest message an activity failure carries (provider messages are already shorter).
MAX_FAILURE_MESSAGE_CHARS = 2000
#: Largest workflow result the pipeline returns before it trims step outputs (below the
#: payload limit, with room for the envelope).
MAX_RESULT_BYTES = 1536 * 1024


def utf8_len(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (what a JSON payload carries, before escaping)."""
    return len(text.encode("utf-8", errors="replace"))


def tail(text: str, limit: int = PARTIAL_TEXT_TAIL_CHARS) -> tuple[str, bool]:
    """The last ``limit`` characters of ``text`` and whether anything was cut."""
    if len(text) <= limit:
        return text, False
    return text[-limit:], True


def clip(text: str, limit: int = MAX_FAILURE_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + "…"
