"""An incremental Server-Sent Events decoder, following the WHATWG event-stream rules.

Provider streams arrive as arbitrary byte chunks: a chunk may end inside a UTF-8
sequence, inside a line, or between the ``\\r`` and ``\\n`` of a CRLF. :class:`SSEDecoder`
is sans-IO (it never awaits), so the adapters can feed it chunk by chunk while they
enforce their own time budgets around each read, and tests can feed it any split.
Supported: ``event``, ``data`` (multi-line, joined with ``\\n``), ``id``, ``retry``,
comments (``:`` lines, used as keep-alives), CR, LF and CRLF line ends, and a leading BOM.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass

#: The event type when a block names none (WHATWG default).
DEFAULT_EVENT = "message"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its type, its data (lines joined by ``\\n``), its id and retry."""

    event: str = DEFAULT_EVENT
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Turns a stream of bytes or text, split anywhere, into :class:`SSEEvent` values.

    Bytes are split into lines before they are decoded: a LF or CR byte never occurs
    inside a UTF-8 sequence, so only whole lines are decoded, once each, and a chunk that
    completes no line costs one concatenation. Text chunks are encoded back to UTF-8.
    """

    def __init__(self) -> None:
        self._pending = b""  # bytes of the current, not yet terminated line
        self._after_cr = False  # the previous chunk ended in CR: a leading LF is its pair
        self._started = False  # the BOM is only meaningful at the very start
        self._event = ""
        self._data: list[str] = []
        self._retry: int | None = None
        self.last_event_id: str | None = None  # survives across events, as in the spec

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        """Consume one chunk and return the events it completed (possibly none)."""
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", errors="surrogatepass")
        if self._after_cr and chunk:
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
            self._after_cr = False
        data = self._pending + chunk if self._pending else chunk
        if b"\r" in data:
            # A CR that ends the chunk may be the first half of a CRLF split across chunks.
            self._after_cr = data[-1:] == b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = data.rfind(b"\n")
        if end < 0:
            self._pending = data
            return []
        self._pending = data[end + 1 :]
        text = data[:end].decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        return self._lines(text.split("\n"))

    def feed_line(self, line: str) -> list[SSEEvent]:
        """Consume one already split line (as from ``aiter_lines``), without its line end."""
        return self._lines([line.rstrip("\r\n")])

    def flush(self) -> list[SSEEvent]:
        """End of stream: dispatch an event whose blank line never came.

        An unterminated last *line* is dropped, not parsed: it is most likely a line the
        connection cut in half, and half a JSON object must read as a cut stream, not as
        garbage.
        """
        self._pending = b""
        events: list[SSEEvent] = []
        self._dispatch(events)
        return events

    def _lines(self, lines: list[str]) -> list[SSEEvent]:
        """Apply whole lines (the hot path: one call per chunk, not per line)."""
        events: list[SSEEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    self._dispatch(events)
                else:
                    self._event, self._retry = "", None
                continue
            field, sep, value = line.partition(":")
            if not field:
                continue  # a comment: servers send these as keep-alives
            if sep and value[:1] == " ":
                value = value[1:]
            if field == "data":
                self._data.append(value)
            elif field == "event":
                self._event = value
            elif field == "id":
                if "\0" not in value:
                    self.last_event_id = value
            elif field == "retry" and value.isascii() and value.isdigit():
                self._retry = int(value)
            # Any other field name is ignored, as the spec requires.
        return events

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if self._data:
            # Positional: a frozen dataclass's keyword call costs twice as much, per event.
            events.append(
                SSEEvent(
                    self._event or DEFAULT_EVENT,
                    self._data[0] if len(self._data) == 1 else "\n".join(self._data),
                    self.last_event_id,
                    self._retry,
                )
            )
        self._event = ""
        self._data = []
        self._retry = None


def decode_all(chunks: Iterable[bytes | str]) -> list[SSEEvent]:
    """Decode a whole stream held in memory (tests, recorded fixtures)."""
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.flush())
    return events


async def aiter_sse(chunks: AsyncIterable[bytes | str]) -> AsyncIterator[SSEEvent]:
    """Events from an async byte or text source such as ``response.aiter_bytes()``.

    This helper applies no time budget; the adapters drive :class:`SSEDecoder` directly
    so that they can bound every read.
    """
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.flush():
        yield event


async def aiter_sse_lines(lines: AsyncIterable[str]) -> AsyncIterator[SSEEvent]:
    """Events from an async source of already split lines, such as ``response.aiter_lines()``."""
    decoder = SSEDecoder()
    async for line in lines:
        for event in decoder.feed_line(line):
            yield event
    for event in decoder.flush():
        yield event
