"""The incremental SSE decoder: fields, multi-line data, comments, line ends, any split."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_failover.providers.sse import (
    SSEDecoder,
    SSEEvent,
    aiter_sse,
    aiter_sse_lines,
    decode_all,
)


def test_basic_fields():
    """event, data, id and retry fields make one event at the blank line."""
    events = decode_all([b'event: delta\ndata: {"a":1}\nid: 7\nretry: 1500\n\n'])
    assert events == [SSEEvent(event="delta", data='{"a":1}', id="7", retry=1500)]


def test_default_event_type_and_multiline_data():
    """Without ``event`` the type is ``message``; data lines join with newlines."""
    assert decode_all([b"data: one\ndata: two\ndata:\n\n"]) == [SSEEvent(data="one\ntwo\n")]


def test_comments_and_unknown_fields_are_ignored():
    """``:`` comments (keep-alives) and unknown fields produce nothing."""
    assert decode_all([b": ping\n\nfoo: bar\n\n:x\ndata: y\n\n"]) == [SSEEvent(data="y")]


def test_event_without_data_is_not_dispatched():
    """A block with no data line is dropped, as the spec says."""
    assert decode_all([b"event: ping\n\n"]) == []


def test_crlf_and_cr_line_ends():
    """CRLF, CR and LF line ends are all accepted."""
    assert decode_all([b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]) == [
        SSEEvent(data="a"),
        SSEEvent(data="b"),
        SSEEvent(data="c"),
    ]


def test_crlf_split_across_chunks_is_one_line_end():
    """A CR at a chunk's end and LF at the next one's start are one line end."""
    assert decode_all([b"data: a\r", b"\n\r", b"\n"]) == [SSEEvent(data="a")]
    # An empty chunk (or half a UTF-8 character) between the CR and the LF changes nothing.
    assert decode_all([b"data: a\r", b"", b"\ndata: \xc3", b"\xa9\n\n"]) == [SSEEvent(data="a\né")]


def test_utf8_split_inside_a_character():
    """A multi-byte character split across chunks is decoded intact."""
    raw = "data: héllo 世界\n\n".encode()
    cut = raw.index("世".encode()) + 1
    assert decode_all([raw[:cut], raw[cut:]]) == [SSEEvent(data="héllo 世界")]


def test_bom_and_no_space_after_colon():
    """A leading BOM is stripped; a value without the leading space is kept whole."""
    assert decode_all(["\ufeffdata:x\n\n".encode()]) == [SSEEvent(data="x")]


def test_field_without_colon_and_id_persistence():
    """A bare ``data`` line is an empty value; the last id carries over to later events."""
    events = decode_all([b"id: 5\ndata\n\ndata: z\n\n"])
    assert events == [SSEEvent(data="", id="5"), SSEEvent(data="z", id="5")]


def test_id_with_nul_is_ignored():
    """An id containing NUL is ignored."""
    assert decode_all([b"id: a\x00b\ndata: q\n\n"]) == [SSEEvent(data="q")]


def test_flush_dispatches_pending_event_but_drops_partial_line():
    """At EOF a complete-but-unterminated event is kept; a half line is not parsed."""
    d = SSEDecoder()
    assert d.feed(b"data: whole\n") == []
    assert d.flush() == [SSEEvent(data="whole")]
    d = SSEDecoder()
    assert d.feed(b'data: {"cut": "in ha') == []
    assert d.flush() == []


STREAM = b"event: a\ndata: 1\r\n\r\n: c\ndata: x\ndata: y\rid: 9\n\nevent: b\ndata: \xc3\xa9\n\n"
EXPECTED = decode_all([STREAM])


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_gives_the_same_events(cuts):
    """However the bytes are chunked, the events are identical."""
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert decode_all(chunks) == EXPECTED
    assert len(EXPECTED) == 3


async def test_async_helpers():
    """aiter_sse over bytes and aiter_sse_lines over split lines agree."""

    async def chunks():
        yield b"data: a\n\nda"
        yield b"ta: b\n\n"

    async def lines():
        for line in ["data: a", "", "data: b", ""]:
            yield line

    got_bytes = [e async for e in aiter_sse(chunks())]
    got_lines = [e async for e in aiter_sse_lines(lines())]
    assert got_bytes == got_lines == [SSEEvent(data="a"), SSEEvent(data="b")]


def reference_decode(stream: bytes) -> list[SSEEvent]:
    """The WHATWG rules applied to a whole stream at once, line by line: what the chunked
    decoder (which splits bytes before decoding) must agree with."""
    text = stream.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = re.split(r"\r\n|\r|\n", text)[:-1]  # an unterminated last line is dropped
    events: list[SSEEvent] = []
    event, data, retry, last_id = "", [], None, None
    for line in [*lines, ""]:  # end of stream dispatches a pending event
        if line == "":
            if data:
                events.append(SSEEvent(event or "message", "\n".join(data), last_id, retry))
            event, data, retry = "", [], None
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id" and "\0" not in value:
                last_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                retry = int(value)
    return events


LINES = st.tuples(
    st.sampled_from([b"data", b"event", b"id", b"retry", b"bogus", b"", b"\xef\xbb\xbfdata"]),
    st.sampled_from([b"", b":", b": ", b"::"]),
    st.sampled_from([b"", b"x", b" 7", b"\xc3\xa9", b"\xe4\xb8\x96", b"\xc3", b"a\x00"]),
    st.sampled_from([b"\n", b"\r", b"\r\n"]),
).map(b"".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(LINES, max_size=12),
    st.sampled_from([b"", b"data: cut", b"\xe4\xb8"]),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
)
def test_chunked_decoding_agrees_with_whole_stream_rules(lines, tail, cuts):
    """Any mix of fields, comments, blank lines, CR / LF / CRLF ends, BOMs and broken
    UTF-8, cut anywhere (between a CR and its LF, inside a character): the same events as
    the line-by-line rules applied to the whole stream."""
    stream = b"".join(lines) + tail
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert decode_all(chunks) == reference_decode(stream)
    assert decode_all([stream.decode("utf-8", errors="replace")]) == reference_decode(stream)
