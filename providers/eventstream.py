"""The AWS event-stream framing (``application/vnd.amazon.eventstream``), decoded by botocore.

Bedrock's ConverseStream answers with binary frames instead of SSE: each message is a
prelude (total and header lengths, CRC32), typed headers (``:message-type``,
``:event-type`` / ``:exception-type``, ``:content-type``), a JSON payload and a message
CRC32. :class:`EventStreamDecoder` wraps botocore's ``EventStreamBuffer`` in the same
sans-IO shape as :class:`~providers.sse.SSEDecoder` (bytes in, whole :class:`Frame`
values out, any split), so the streaming pump enforces the same budgets around every
read. A checksum or length error means the framing itself broke: nothing after it can
be trusted, so it raises :class:`~providers.wire.StreamFramingError` at once. An
incomplete frame at end of stream is simply not returned (a cut stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_failover.providers.extras import BOTOCORE, require
from agent_failover.providers.wire import StreamFramingError

#: The response content type of an event stream.
CONTENT_TYPE = "application/vnd.amazon.eventstream"


@dataclass(frozen=True)
class Frame:
    """One decoded message: its type (``event``, ``exception``, ``error``), name and payload."""

    message_type: str
    name: str  # :event-type, :exception-type or :error-code
    payload: bytes
    headers: dict[str, Any]

    @property
    def is_error(self) -> bool:
        """An exception or error frame (in-stream failure)."""
        return self.message_type in ("exception", "error")


def frame_of(headers: dict[str, Any], payload: bytes) -> Frame:
    """A :class:`Frame` from a message's parsed headers and payload."""
    kind = str(headers.get(":message-type", "event"))
    name_header = {"exception": ":exception-type", "error": ":error-code"}.get(kind, ":event-type")
    return Frame(kind, str(headers.get(name_header, "")), payload, headers)


class EventStreamDecoder:
    """Feeds bytes to botocore's ``EventStreamBuffer`` and returns the frames completed."""

    def __init__(self) -> None:
        eventstream = require(BOTOCORE[0] + ".eventstream", BOTOCORE[1], "event-stream decoding")
        self._buffer = eventstream.EventStreamBuffer()
        self._parser_error: type[Exception] = eventstream.ParserError
        self.frames = 0

    def feed(self, chunk: bytes) -> list[Frame]:
        """Consume one chunk; return the frames it completed (possibly none)."""
        self._buffer.add_data(chunk)
        out: list[Frame] = []
        try:
            for message in self._buffer:
                out.append(frame_of(message.headers, message.payload))
        except self._parser_error as exc:
            raise StreamFramingError(f"{type(exc).__name__}: {exc}") from exc
        self.frames += len(out)
        return out

    def flush(self) -> list[Frame]:
        """End of stream: a partial frame is a cut, never an event."""
        return []
