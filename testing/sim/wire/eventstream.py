"""Encoding the AWS event-stream framing (``application/vnd.amazon.eventstream``).

Each message: a 12-byte prelude (total length, headers length, CRC32 of those 8 bytes),
the headers (name length, name, type 7 = string, value length, value), the payload,
and a CRC32 of everything before it. botocore has only a decoder; this is the encoder
the simulator's Bedrock wire streams with, so boto3, the Anthropic Bedrock SDK and the
project's adapter all decode real frames.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

_STRING = 7
#: The response content type of an event stream.
CONTENT_TYPE = "application/vnd.amazon.eventstream"


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack(">B", len(raw_name))
        + raw_name
        + struct.pack(">BH", _STRING, len(raw_value))
        + raw_value
    )


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed message with string headers and CRCs."""
    head = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(event_type: str, payload: dict[str, Any] | bytes) -> bytes:
    """An ``event`` message (JSON payload)."""
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return encode_message(
        {
            ":event-type": event_type,
            ":content-type": "application/json",
            ":message-type": "event",
        },
        raw,
    )


def exception(exception_type: str, message: str) -> bytes:
    """An ``exception`` message, as Bedrock sends for a failure inside a 200 stream."""
    return encode_message(
        {
            ":exception-type": exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )
