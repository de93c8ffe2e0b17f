"""Recording exchanges into a cassette, redacted, as the chaos proxy forwards them.

``failover chaos-proxy --record DIR`` gives the proxy a :class:`Recorder`. For each
request the proxy calls :meth:`Recorder.start`; the returned :class:`ExchangeRecording`
tees the upstream's body as it is relayed (:meth:`ExchangeRecording.tee`, nothing is
delayed or buffered on the client's path) and is written as one line when the exchange
ends. Redaction uses :mod:`agent_failover.providers.redact`: credential-bearing headers
and query values by name, and in every other string (header values, body chunks) the
literal credentials this very request carried, key-shaped tokens and ``name=value``
pairs. A credential split across two body chunks is caught by merging those chunks
first, so the key never reaches the file whole or in parts.
"""

from __future__ import annotations

import base64
import codecs
import time
import zlib
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl

import httpx

from agent_failover.providers.redact import (
    MIN_SECRET_VALUE_LEN,
    REDACTED,
    is_secret,
    redact_headers,
    redact_target,
    redact_text,
)
from agent_failover.testing.replay.cassette import (
    End,
    Exchange,
    Mark,
    RecordedResponse,
    RequestSummary,
    header_line,
)

#: Response headers a cassette never keeps: the body is stored decoded and re-framed.
_DROP_RESPONSE = frozenset({"content-length", "content-encoding", "transfer-encoding"})
_DECODABLE = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS}


def secret_values(
    headers: Iterable[tuple[str, str]], query: Iterable[tuple[str, str]]
) -> list[str]:
    """The credential values a request carries (``Bearer x`` gives both forms), longest first."""
    found: set[str] = set()
    for name, value in [*headers, *query]:
        if not is_secret(name) or not value:
            continue
        found.add(value)
        found.update(part for part in value.replace(",", " ").split() if "=" not in part)
        found.update(p.split("=", 1)[1] for p in value.replace(",", " ").split() if "=" in p)
    usable = {s for s in found if len(s) >= MIN_SECRET_VALUE_LEN}
    return sorted(usable, key=len, reverse=True)


def scrub_headers(
    headers: Iterable[tuple[str, str]], secrets: list[str], drop: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """Headers redacted by name, then every value scrubbed of the literal secrets."""
    kept = [(k, v) for k, v in headers if k.lower() not in drop]
    return [(k, redact_text(v, secrets)) for k, v in redact_headers(kept)]


def _merge_straddling(
    pieces: list[tuple[float, str]], secrets: list[str]
) -> list[tuple[float, str]]:
    """Merge consecutive chunks that a secret straddles (the merged chunk keeps the
    later time: the secret was not complete before then)."""
    text = "".join(p for _, p in pieces)
    cuts: set[int] = set()
    pos = 0
    for _, piece in pieces[:-1]:
        pos += len(piece)
        cuts.add(pos)
    doomed: set[int] = set()
    for secret in secrets:
        start = text.find(secret)
        while start >= 0:
            doomed.update(c for c in cuts if start < c < start + len(secret))
            start = text.find(secret, start + 1)
    out: list[tuple[float, str]] = []
    pos = 0
    for t, piece in pieces:
        if out and pos in doomed:
            out[-1] = (t, out[-1][1] + piece)
        else:
            out.append((t, piece))
        pos += len(piece)
    return out


def redact_chunks(
    chunks: list[tuple[float, bytes]], secrets: list[str]
) -> tuple[str, list[tuple[float, str]]]:
    """The body as redacted text chunks (UTF-8), else base64 with secrets masked."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        pieces = [(t, decoder.decode(c)) for t, c in chunks]
        tail = decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return "base64", [(t, _mask_bytes(c, secrets)) for t, c in chunks]
    if tail and pieces:
        pieces[-1] = (pieces[-1][0], pieces[-1][1] + tail)
    merged = _merge_straddling(pieces, secrets)
    return "text", [(round(t, 4), redact_text(p, secrets)) for t, p in merged]


def _mask_bytes(chunk: bytes, secrets: list[str]) -> str:
    # Binary frames (AWS event-stream) carry lengths: mask in place, keep the length.
    for s in secrets:
        raw = s.encode()
        chunk = chunk.replace(raw, b"*" * len(raw))
    return base64.b64encode(chunk).decode("ascii")


class _TeeStream(httpx.AsyncByteStream):
    """Passes the upstream's raw chunks on unchanged, noting each with its time."""

    def __init__(self, inner: httpx.AsyncByteStream, rec: ExchangeRecording) -> None:
        self.inner, self.rec = inner, rec

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.rec.chunks.append((self.rec.elapsed(), chunk))
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class ExchangeRecording:
    """One exchange being recorded: the request summary now, the answer as it comes."""

    def __init__(self, recorder: Recorder, summary: dict[str, Any], secrets: list[str]) -> None:
        self.recorder, self.summary, self.secrets = recorder, summary, secrets
        self.at = time.time()
        self._t0 = time.monotonic()
        self.status: int | None = None
        self.reason: str | None = None
        self.headers: list[tuple[str, str]] = []
        self.headers_s: float | None = None
        self.chunks: list[tuple[float, bytes]] = []
        self.end: End | None = None
        self.note: str | None = None

    def elapsed(self) -> float:
        """Seconds since the request arrived."""
        return time.monotonic() - self._t0

    def tee(self, upstream: httpx.Response) -> None:
        """Note the status line and headers, and record the body as it is relayed."""
        self.headers_s = self.elapsed()
        self.status, self.reason = upstream.status_code, upstream.reason_phrase or None
        self.headers = list(upstream.headers.multi_items())
        upstream.stream = _TeeStream(upstream.stream, self)  # type: ignore[arg-type]

    def answered(
        self, status: int, reason: str | None, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        """A whole answer given at once (one the proxy wrote itself)."""
        self.headers_s = self.elapsed()
        self.status, self.reason, self.headers = status, reason, headers
        self.chunks = [(self.headers_s, bytes(body))] if body else []

    def fail(self, end: End, note: str) -> None:
        """The exchange ended early: the connection dropped, or the client left."""
        self.end, self.note = end, note

    def finish(self, client_left: bool) -> None:
        """Write the exchange (once), redacted."""
        end: End = self.end or ("client_left" if client_left else "complete")
        encoding, chunks = self._body()
        response = RecordedResponse(
            status=self.status,
            reason=self.reason,
            headers=scrub_headers(self.headers, self.secrets, _DROP_RESPONSE),
            headers_s=None if self.headers_s is None else round(self.headers_s, 4),
            encoding=encoding,  # type: ignore[arg-type]
            chunks=chunks,
            end=end,
            end_s=round(self.elapsed(), 4),
            note=self.note,
        )
        summary = RequestSummary.model_validate(self.summary)
        self.recorder.write(Exchange(at=self.at, request=summary, response=response))

    def _body(self) -> tuple[str, list[tuple[float, str]]]:
        coding = dict((k.lower(), v) for k, v in self.headers).get("content-encoding", "")
        coding = coding.strip().lower()
        chunks = self.chunks
        if coding and coding != "identity":
            if coding not in _DECODABLE:
                self.note = f"body not recorded: content-encoding {coding}"
                return "text", []
            inflate = zlib.decompressobj(_DECODABLE[coding])
            chunks = [(t, inflate.decompress(c)) for t, c in chunks]
        return redact_chunks(chunks, self.secrets)


class Recorder:
    """Appends exchanges to one cassette file in ``folder`` (a line each, flushed)."""

    def __init__(
        self,
        folder: str | Path,
        *,
        upstream: str,
        endpoint: str | None = None,
        name: str | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        stem = name or f"{endpoint or 'proxy'}-{time.strftime('%Y%m%dT%H%M%S')}"
        self.path = self.folder / f"{stem}.jsonl"
        self.endpoint = endpoint
        self.count = 0
        self._file: IO[str] = self.path.open("w", encoding="utf-8")
        self._file.write(header_line(time.time(), upstream, endpoint) + "\n")
        self._file.flush()

    def start(
        self,
        method: str,
        path: str,
        query_string: str,
        headers: Iterable[tuple[str, str]],
        info: Any,
        body_bytes: int,
    ) -> ExchangeRecording:
        """Begin recording a request (``info``: the proxy's description of it)."""
        header_items = list(headers)
        query = _query_pairs(query_string)
        secrets = secret_values(header_items, query)
        target = redact_text(redact_target(path, query_string), secrets)
        bare, _, q = target.partition("?")
        prefix = f"/{self.endpoint}" if self.endpoint else ""
        summary = {
            "method": method,
            "path": prefix + bare,
            "query": q,
            "provider": getattr(info, "provider", None),
            "model": redact_text(str(getattr(info, "model", "") or ""), secrets),
            "stream": bool(getattr(info, "stream", False)),
            "body_bytes": body_bytes,
            "headers": scrub_headers(header_items, secrets),
        }
        return ExchangeRecording(self, summary, secrets)

    def write(self, exchange: Exchange) -> None:
        """Append one exchange."""
        if self._file.closed:
            return
        self._file.write(exchange.model_dump_json(exclude_none=True) + "\n")
        self._file.flush()
        self.count += 1

    def mark(self, load: Mapping[str, Any] | None = None, events: Any = None) -> None:
        """Note that the load starts now (and, when known, its settings and fault windows)."""
        mark = Mark(at=time.time(), load=dict(load) if load else None, events=events)
        self._file.write('{"mark": ' + mark.model_dump_json(exclude_none=True) + "}\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file; later exchanges are dropped."""
        self._file.close()


def _query_pairs(query_string: str) -> list[tuple[str, str]]:
    return parse_qsl(query_string, keep_blank_values=True)


__all__ = ["REDACTED", "ExchangeRecording", "Recorder", "redact_chunks", "secret_values"]
