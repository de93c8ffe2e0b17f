"""Cassettes: what providers did during an incident, exchange by exchange, with timing.

A cassette is a folder of JSON-lines files (``*.jsonl``), one per recording proxy. Each
file opens with a header line (``{"cassette": 1, "started_at": ..., "upstream": ...}``),
then holds one line per exchange, written when the exchange ended:

* ``at``: when the request arrived (epoch seconds);
* ``request``: its summary (method, path and redacted query, provider, model, streaming,
  body size, redacted headers) - never its body;
* ``response``: status, reason and redacted headers (``status`` null: no status line
  ever came), ``headers_s`` (seconds from arrival to the status line), the body as
  ``[seconds after arrival, data]`` chunks (text, or base64 when ``encoding`` says so),
  and how it ``end``-ed: ``complete``, ``reset`` (the connection dropped at ``end_s``)
  or ``client_left`` (nothing more came before the client gave up at ``end_s``).

A ``mark`` line (``{"mark": {"at": ..., "load": {...}, "events": [...]}}``) says where the
load started and, when known, its settings and fault windows (``failover drill
--record`` writes one). Loading checks every line; a bad one is a :class:`CassetteError`
naming the file and line.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

CASSETTE_VERSION = 1
End = Literal["complete", "reset", "client_left"]


class CassetteError(ValueError):
    """A cassette folder or file that cannot be replayed (the message names the file)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RequestSummary(_Model):
    """What was asked, without the prompt: enough to match a later request."""

    method: str
    path: str
    query: str = ""
    provider: str | None = None
    model: str = ""
    stream: bool = False
    body_bytes: int = Field(default=0, ge=0)
    headers: list[tuple[str, str]] = Field(default_factory=list)


class RecordedResponse(_Model):
    """What came back, and when (seconds after the request arrived)."""

    status: int | None = Field(default=None, ge=100, le=599)
    reason: str | None = None
    headers: list[tuple[str, str]] = Field(default_factory=list)
    headers_s: float | None = Field(default=None, ge=0.0)
    encoding: Literal["text", "base64"] = "text"
    chunks: list[tuple[float, str]] = Field(default_factory=list)
    end: End = "complete"
    end_s: float = Field(default=0.0, ge=0.0)
    note: str | None = None

    def chunk_bytes(self) -> list[tuple[float, bytes]]:
        """The body chunks as bytes, with their offsets."""
        if self.encoding == "base64":
            return [(t, base64.b64decode(d)) for t, d in self.chunks]
        return [(t, d.encode("utf-8")) for t, d in self.chunks]

    @property
    def failed(self) -> bool:
        """No usable answer: an error status, a dropped connection or nothing at all."""
        return self.status is None or self.status >= 400 or self.end != "complete"


class Exchange(_Model):
    """One request and its answer."""

    at: float
    request: RequestSummary
    response: RecordedResponse

    @property
    def route(self) -> str:
        """The path's first segment: the endpoint name on a simulator-shaped path."""
        return self.request.path.lstrip("/").split("/", 1)[0] or "/"


class Mark(_Model):
    """Where the load started; its settings and fault windows when known."""

    at: float
    load: dict[str, Any] | None = None
    events: list[tuple[float, float, str]] | None = None


class Header(_Model):
    """A cassette file's first line."""

    cassette: int
    started_at: float
    upstream: str = ""
    endpoint: str | None = None


class Cassette(_Model):
    """Every exchange of a cassette folder, sorted by arrival."""

    name: str
    started_at: float
    exchanges: list[Exchange]
    mark: Mark | None = None

    @property
    def start(self) -> float:
        """Epoch time the replay's t=0 stands for (the mark, else the recording start)."""
        return self.mark.at if self.mark is not None else self.started_at

    @property
    def end(self) -> float:
        """Epoch time the last exchange ended."""
        if not self.exchanges:
            return self.start
        return max(e.at + e.response.end_s for e in self.exchanges)


def header_line(started_at: float, upstream: str, endpoint: str | None) -> str:
    """The first line of a new cassette file."""
    head = Header(
        cassette=CASSETTE_VERSION, started_at=started_at, upstream=upstream, endpoint=endpoint
    )
    return head.model_dump_json(exclude_none=True)


def _fail(path: Path, lineno: int, problem: str) -> CassetteError:
    return CassetteError(f"{path} line {lineno}: {problem}")


def _parse_line(path: Path, lineno: int, line: str) -> dict[str, Any]:
    try:
        doc = json.loads(line)
    except ValueError as exc:
        raise _fail(path, lineno, f"not JSON ({exc.msg})") from None
    if not isinstance(doc, dict):
        raise _fail(path, lineno, "expected a JSON object")
    return doc


def _validate(model: type[_Model], doc: Any, path: Path, lineno: int) -> Any:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise _fail(path, lineno, f"{loc}: {first['msg']}".lstrip(": ")) from None


def read_cassette_file(path: Path) -> tuple[Header, list[Exchange], Mark | None]:
    """One file's header, exchanges and last mark; errors name the file and line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"{path}: cannot read: {exc}") from None
    if not lines or not lines[0].strip():
        raise _fail(path, 1, "empty: a cassette file opens with its header line")
    head_doc = _parse_line(path, 1, lines[0])
    if head_doc.get("cassette") != CASSETTE_VERSION:
        raise _fail(path, 1, f"not a cassette header (want 'cassette': {CASSETTE_VERSION})")
    header: Header = _validate(Header, head_doc, path, 1)
    exchanges: list[Exchange] = []
    mark: Mark | None = None
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        doc = _parse_line(path, lineno, line)
        if "mark" in doc:
            mark = _validate(Mark, doc["mark"], path, lineno)
        else:
            exchanges.append(_validate(Exchange, doc, path, lineno))
    return header, exchanges, mark


def load_cassette(folder: str | Path) -> Cassette:
    """Every ``*.jsonl`` file in ``folder`` as one cassette (a :class:`CassetteError`
    names the folder or the file and line that is wrong)."""
    root = Path(folder)
    if not root.is_dir():
        raise CassetteError(f"{root}: no such cassette folder")
    files = sorted(root.glob("*.jsonl"))
    if not files:
        raise CassetteError(f"{root}: no cassette files (*.jsonl) in this folder")
    starts: list[float] = []
    exchanges: list[Exchange] = []
    marks: list[Mark] = []
    for path in files:
        header, found, mark = read_cassette_file(path)
        starts.append(header.started_at)
        exchanges.extend(found)
        if mark is not None:
            marks.append(mark)
    if not exchanges:
        raise CassetteError(f"{root}: the cassette holds no exchange")
    exchanges.sort(key=lambda e: e.at)
    mark = max(marks, key=lambda m: m.at) if marks else None
    return Cassette(name=root.name, started_at=min(starts), exchanges=exchanges, mark=mark)
