"""Cassettes for the replay tests: written line by line, or cut from the example cassette
(recorded from the project's own simulator, so its bodies are real wire formats)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_failover.testing.replay.cassette import Exchange, header_line, read_cassette_file
from tests.structure import ROOT

EXAMPLE = ROOT / "bench" / "cassettes" / "short_outage"
T0 = 1_800_000_000.0


def write_cassette(
    folder: Path,
    exchanges: list[dict[str, Any]],
    *,
    mark: dict[str, Any] | None = None,
    name: str = "test",
    started_at: float = T0,
) -> Path:
    """A cassette file ``name.jsonl`` in ``folder`` holding ``exchanges`` (dicts or
    Exchange models)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [header_line(started_at, "http://upstream.test", None)]
    for ex in exchanges:
        doc = ex.model_dump(mode="json") if isinstance(ex, Exchange) else ex
        lines.append(json.dumps(doc))
    if mark is not None:
        lines.append(json.dumps({"mark": mark}))
    path = folder / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def example_exchange(route: str, status: int, *, stream: bool = True) -> Exchange:
    """The first exchange the example cassette holds for ``route`` with ``status``."""
    (path,) = EXAMPLE.glob("*.jsonl")
    _, exchanges, _ = read_cassette_file(path)
    for ex in exchanges:
        if ex.route == route and ex.response.status == status and ex.request.stream == stream:
            return ex
    raise LookupError(f"the example cassette has no {status} from {route}")


def at(ex: Exchange, seconds: float) -> Exchange:
    """``ex`` arriving ``seconds`` after the test cassette's start."""
    return ex.model_copy(update={"at": T0 + seconds})
