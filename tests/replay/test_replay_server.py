"""The replay server plays recorded exchanges back as they happened: the status line and
each chunk at their recorded offsets, error statuses and headers as recorded, a dropped
connection as a reset, the exchange current at the request's moment of the incident
(its own timeline, ``seek``, or the client's ``x-replay-at``), and 501 for a path the
cassette never saw."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from agent_failover.testing.replay import ReplayClockTransport, load_cassette, start_replay
from agent_failover.testing.replay.server import UNMATCHED_STATUS
from tests.replay.helpers import T0, write_cassette

PATH = "/anthropic-us-east/v1/messages"
GAP_S = 0.25


def _exchange(t: float, status: int | None, chunks: list[tuple[float, str]], **rsp) -> dict:
    return {
        "at": T0 + t,
        "request": {"method": "POST", "path": PATH, "stream": True},
        "response": {
            "status": status,
            "headers": [["content-type", "text/event-stream"], ["retry-after", "7"]],
            "headers_s": chunks[0][0] if chunks else None,
            "chunks": chunks,
            **rsp,
        },
    }


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    return write_cassette(
        tmp_path / "tape",
        [
            _exchange(0.0, 200, [(GAP_S, "data: a\n\n"), (2 * GAP_S, "data: b\n\n")]),
            _exchange(10.0, 529, [(0.0, '{"type": "error"}')]),
            _exchange(20.0, None, [], end="reset", end_s=GAP_S),
        ],
    )


async def _timed_stream(
    client: httpx.AsyncClient, url: str, **kw
) -> tuple[int, list[float], bytes]:
    t0 = time.monotonic()
    arrivals: list[float] = []
    body = b""
    async with client.stream("POST", url, json={"stream": True}, **kw) as r:
        arrivals.append(time.monotonic() - t0)
        async for chunk in r.aiter_raw():
            arrivals.append(time.monotonic() - t0)
            body += chunk
    return r.status_code, arrivals, body


async def test_streamed_answer_keeps_its_timing(cassette: Path) -> None:
    """The first chunk 0.25 s after the request, the second at 0.5 s (offsets count from
    the request, as recorded), bytes as recorded."""
    async with await start_replay(cassette) as replay, httpx.AsyncClient() as client:
        status, arrivals, body = await _timed_stream(client, replay.url + PATH)
    assert status == 200 and body == b"data: a\n\ndata: b\n\n"
    assert len(arrivals) == 3  # headers, then the two chunks as two reads
    assert arrivals[1] >= GAP_S * 0.9
    assert arrivals[2] >= 2 * GAP_S * 0.9
    assert arrivals[2] < 2 * GAP_S + 1.5


async def test_the_exchange_current_at_that_moment_answers(cassette: Path) -> None:
    """At 12 s the recorded 529 (with its Retry-After); at 21 s a reset; seek moves the
    timeline, and an ``x-replay-at`` header overrides it."""
    async with await start_replay(cassette, at=12.0) as replay, httpx.AsyncClient() as c:
        r = await c.post(replay.url + PATH, json={"stream": True})
        assert r.status_code == 529 and r.headers["retry-after"] == "7"
        replay.seek(21.0)
        with pytest.raises(httpx.HTTPError):
            await c.post(replay.url + PATH, json={"stream": True})
        r = await c.post(replay.url + PATH, json={"stream": True}, headers={"x-replay-at": "1"})
        assert r.status_code == 200
        assert replay.state.arrivals[0] >= 21.0 and replay.state.arrivals[1] == 1.0
        r = await c.post(replay.url + "/nowhere/v1/messages", json={})
        assert r.status_code == UNMATCHED_STATUS and replay.state.unmatched == 1


async def test_clock_transport_stamps_the_incident_time(cassette: Path) -> None:
    """The transport sends the time since ``start`` on its clock: 15 s in gets the 529."""
    now = [1000.0]
    transport = ReplayClockTransport(clock=lambda: now[0])
    transport.start(985.0)
    async with await start_replay(load_cassette(cassette)) as replay:
        async with httpx.AsyncClient(transport=transport) as c:
            r = await c.post(replay.url + PATH, json={"stream": True})
    assert r.status_code == 529 and replay.state.arrivals == [15.0]
