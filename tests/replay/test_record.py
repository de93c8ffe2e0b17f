"""Recording through the chaos proxy (``--record``): each exchange lands in the cassette
with its status, headers and body chunks at their offsets, the client gets the upstream's
bytes unchanged, and no credential is ever written (a sentinel key sent in headers, in
the query and in the body, and echoed back by the upstream in a header and across two
body chunks, is absent from the file)."""

from __future__ import annotations

import asyncio
import gzip
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio
from aiohttp import web

from agent_failover.cli.drill import recording_front
from agent_failover.testing.chaos_proxy import pass_through_scenario, start_chaos_proxy
from agent_failover.testing.drill import load_drill
from agent_failover.testing.replay.cassette import load_cassette
from agent_failover.testing.replay.record import Recorder
from agent_failover.testing.sim.admin import SimAdmin
from tests.structure import ROOT

SENTINEL = "SENTINEL-7f3a9c2e1d"  # not key-shaped: only the literal match can catch it
GAP_S = 0.3


async def _echo_key(request: web.Request) -> web.StreamResponse:
    """An upstream that leaks the caller's key back, split across two chunks."""
    key = request.headers["authorization"].removeprefix("Bearer ")
    resp = web.StreamResponse(
        headers={"content-type": "text/event-stream", "x-echo": key, "set-cookie": f"s={key}"}
    )
    await resp.prepare(request)
    await resp.write(b'data: {"n": 1}\n\n')
    await asyncio.sleep(0.05)
    await resp.write(f'data: {{"error": "bad key {key[:9]}'.encode())
    await asyncio.sleep(0.05)
    await resp.write(f'{key[9:]}"}}\n\n'.encode())
    await resp.write_eof()
    return resp


async def _paced(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await resp.prepare(request)
    for i in range(3):
        if i:
            await asyncio.sleep(GAP_S)
        await resp.write(f"data: {i}\n\n".encode())
    await resp.write_eof()
    return resp


async def _binary(request: web.Request) -> web.Response:
    return web.Response(body=bytes(range(256)), content_type="application/vnd.amazon.eventstream")


async def _gzip(request: web.Request) -> web.Response:
    """An upstream that compresses although the proxy asked for an unencoded body."""
    assert request.headers["accept-encoding"] == "identity"
    body = gzip.compress(b'{"echo": "' + request.headers["x-api-key"].encode() + b'"}')
    return web.Response(body=body, headers={"content-encoding": "gzip"})


async def _reset(request: web.Request) -> web.Response:
    assert request.transport is not None
    request.transport.abort()
    return web.Response()


@pytest_asyncio.fixture
async def upstream() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _echo_key)
    app.router.add_post("/v1/paced", _paced)
    app.router.add_post("/v1/binary", _binary)
    app.router.add_post("/v1/reset", _reset)
    app.router.add_post("/v1/gzip", _gzip)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def _record(upstream: str, folder: Path, calls: list[tuple[str, dict]]) -> list[bytes]:
    recorder = Recorder(folder, upstream=upstream, name="rec")
    proxy = await start_chaos_proxy(upstream, pass_through_scenario(), recorder=recorder)
    bodies: list[bytes] = []
    try:
        async with httpx.AsyncClient(base_url=proxy.url, timeout=10) as client:
            for path, kwargs in calls:
                try:
                    bodies.append((await client.post(path, **kwargs)).content)
                except httpx.HTTPError:
                    bodies.append(b"")
    finally:
        await proxy.stop()
        recorder.close()
    return bodies


async def test_sentinel_key_never_reaches_the_cassette(upstream: str, tmp_path: Path) -> None:
    """In headers (Authorization, x-api-key), the query (?key=), the request body and the
    upstream's echo (a header, a cookie, a body split mid-key) the key is redacted."""
    call = {
        "headers": {"authorization": f"Bearer {SENTINEL}", "x-api-key": SENTINEL},
        "params": {"key": SENTINEL, "alt": "sse"},
        "json": {"model": "m", "stream": True, "messages": [{"content": f"my key {SENTINEL}"}]},
    }
    (body,) = await _record(upstream, tmp_path, [("/v1/chat/completions", call)])
    assert SENTINEL.encode() in body  # the client got the upstream's bytes untouched
    text = (tmp_path / "rec.jsonl").read_text()
    assert SENTINEL not in text
    assert SENTINEL[9:] not in text and SENTINEL[:9] + '"' not in text
    (ex,) = load_cassette(tmp_path).exchanges
    assert ex.request.stream is True and ex.request.query == "key=<redacted>&alt=sse"
    sent = {k.lower(): v for k, v in ex.request.headers}
    got = {k.lower(): v for k, v in ex.response.headers}
    assert sent["authorization"] == sent["x-api-key"] == "<redacted>"
    assert got["x-echo"] == "<redacted>" and SENTINEL not in got["set-cookie"]
    assert ex.response.status == 200
    assert "<redacted>" in "".join(d for _, d in ex.response.chunks)


async def test_chunk_timing_binary_bodies_and_resets_are_kept(
    upstream: str, tmp_path: Path
) -> None:
    """Three chunks 0.3 s apart are stored 0.3 s apart; a binary body as base64, byte for
    byte; an upstream that drops the connection as a ``reset`` with no status."""
    bodies = await _record(
        upstream,
        tmp_path,
        [("/v1/paced", {"content": b"{}"}), ("/v1/binary", {}), ("/v1/reset", {})],
    )
    paced, binary, reset = load_cassette(tmp_path).exchanges
    offsets = [t for t, _ in paced.response.chunks]
    assert len(offsets) == 3
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    assert all(GAP_S * 0.8 <= g <= GAP_S * 3 for g in gaps), gaps
    assert b"".join(c for _, c in paced.response.chunk_bytes()) == bodies[0]
    assert paced.response.headers_s is not None and paced.response.headers_s <= offsets[0]
    assert binary.response.encoding == "base64"
    assert b"".join(c for _, c in binary.response.chunk_bytes()) == bytes(range(256))
    assert reset.response.status is None and reset.response.end == "reset"


async def test_compressed_answer_is_stored_decoded_and_redacted(
    upstream: str, tmp_path: Path
) -> None:
    """A gzip body (sent despite ``accept-encoding: identity``) is decoded, so the key in
    it can be found and redacted; the stored headers drop the encoding."""
    call = {"headers": {"x-api-key": SENTINEL, "accept-encoding": "gzip"}}
    (body,) = await _record(upstream, tmp_path, [("/v1/gzip", call)])
    assert SENTINEL.encode() in body  # the client got (and httpx decoded) the real answer
    assert SENTINEL not in (tmp_path / "rec.jsonl").read_text()
    (ex,) = load_cassette(tmp_path).exchanges
    assert "".join(d for _, d in ex.response.chunks) == '{"echo": "<redacted>"}'
    assert "content-encoding" not in {k.lower() for k, _ in ex.response.headers}


async def test_drill_records_through_a_proxy_and_marks_the_load(
    sim_admin: SimAdmin, tmp_path: Path
) -> None:
    """``failover drill --record``'s front: requests reach the simulator through a
    recording proxy, and the mark carries the drill's load and fault windows."""
    drill = load_drill(ROOT / "bench/cassettes/short_outage.yaml")
    async with recording_front(sim_admin, drill, tmp_path) as (url, mark):
        assert mark is not None
        mark()
        async with httpx.AsyncClient() as client:
            r = await client.post(
                f"{url}/openai-us/v1/chat/completions",
                json={"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]},
            )
    tape = load_cassette(tmp_path)
    assert r.status_code == 200 and [e.response.status for e in tape.exchanges] == [200]
    assert tape.exchanges[0].request.path == "/openai-us/v1/chat/completions"
    assert tape.mark is not None and tape.mark.load == drill.drill.model_dump()
    assert tape.mark.events == [(5.0, 11.0, "primary overloaded")]
