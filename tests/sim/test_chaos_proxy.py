"""The chaos proxy: scenario selectors, pass-through fidelity, timeline phases, secrets.

Pass-through is checked against a small recording upstream (exact bytes, methods,
headers, a stream gated by the test) and against the simulator; the timeline runs on a
fake clock so phases switch exactly at their boundaries without waiting.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from agent_failover.testing.chaos_proxy import (
    ProxyIdentity,
    ProxyScenario,
    load_proxy_scenario,
    start_chaos_proxy,
)
from agent_failover.testing.chaos_proxy.relay import EventSplitter, end_to_end, is_terminal
from agent_failover.testing.chaos_proxy.scenario import (
    Timeline,
    describe_request,
    redact_headers,
    redact_target,
)
from agent_failover.testing.chaos_proxy.server import describe_startup
from agent_failover.testing.sim.clock import FakeClock
from agent_failover.testing.sim.wire import eventstream as es
from tests.sim.simtest_helpers import anthropic_body, json_events, openai_body

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-chaos-SENTINEL-7f3a9c"


def scenario(*events: dict, name: str = "t") -> ProxyScenario:
    return ProxyScenario.model_validate({"name": name, "events": list(events)})


NO_FAULTS = scenario({"from": 1e6, "path": "/never", "answers": 500})


# --- scenario file, selectors, detection ---------------------------------------------


def test_drill_files_load_and_bad_events_name_the_field(tmp_path: Path) -> None:
    """bench/scenarios drill files load as they are (``drill:`` ignored); a bad fault names
    the file and the event's field; an event must select something."""
    sc = load_proxy_scenario(ROOT / "bench/scenarios/hard_primary_outage.yaml")
    assert sc.name == "hard_primary_outage" and sc.events[0].faults[0].label == "http_error_529"
    bad = tmp_path / "bad.yaml"
    bad.write_text("events:\n  - {from: 0, path: /x, faults: [{kind: stream_stall}]}\n")
    with pytest.raises(ValueError, match=r"(?s)bad.yaml: events\.0\.faults\.0.*needs 'seconds'"):
        load_proxy_scenario(bad)
    with pytest.raises(ValueError, match="must select"):
        scenario({"from": 0, "answers": 529})


@pytest.mark.parametrize(
    ("method", "path", "query", "body", "expected"),
    [
        ("POST", "/v1/messages", {}, anthropic_body(stream=True), ("anthropic", True)),
        ("POST", "/openai-us/v1/chat/completions", {}, openai_body(), ("openai", False)),
        (
            "POST",
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            {"alt": "sse"},
            {},
            ("gemini", True),
        ),
        ("POST", "/model/anthropic.claude/converse-stream", {}, {}, ("bedrock", True)),
        (
            "POST",
            "/openai/deployments/gpt4o/chat/completions",
            {"api-version": "2024-10-21"},
            {"stream": True},
            ("azure", True),
        ),
        ("GET", "/v1/files", {}, None, (None, False)),
    ],
)
def test_describe_request_detects_provider_model_and_stream(
    method, path, query, body, expected
) -> None:
    raw = b"" if body is None else json.dumps(body).encode()
    info = describe_request(method, path, query, raw)
    assert (info.provider, info.stream) == expected
    if path.startswith("/v1beta"):
        assert info.model == "gemini-2.5-flash"


def test_event_selectors_all_must_match() -> None:
    """endpoint (ours or the first path segment), organisation, region, path glob,
    provider and model each narrow an event; every one given must match."""
    sc = scenario(
        {"from": 0, "endpoint": "primary", "answers": 529},
        {"from": 0, "path": "*:streamGenerateContent", "answers": 503},
        {"from": 0, "organisation": "acme", "provider": "openai", "answers": 500},
        {"from": 0, "model": "gpt-4.1", "region": "eu", "answers": 502},
    )
    tl = Timeline(sc, ProxyIdentity(endpoint="primary", organisation="acme", region="us"), 0.0)

    def statuses(path: str, body: dict, query: dict | None = None) -> list[int]:
        info = describe_request("POST", path, query or {}, json.dumps(body).encode())
        return [f.status for f in tl.faults_for(info, 1.0)]

    assert statuses("/v1/messages", anthropic_body()) == [529]
    assert statuses("/v1/chat/completions", openai_body()) == [529, 500]
    gem = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert statuses(gem, {}, {"alt": "sse"}) == [529, 503]
    other = Timeline(sc, ProxyIdentity(endpoint="x", region="eu"), 0.0)
    info = describe_request("POST", "/primary/v1/chat/completions", {}, b'{"model":"gpt-4.1"}')
    assert [f.status for f in other.faults_for(info, 1.0)] == [529, 502]


def test_event_splitter_keeps_bytes_across_chunk_boundaries() -> None:
    """SSE blocks (LF or CRLF) and event-stream frames come out whole and byte-exact."""
    sse = b'event: a\ndata: {"x":1}\n\ndata: [DONE]\r\n\r\n'
    sp = EventSplitter("sse")
    out = [e for i in range(len(sse)) for e in sp.feed(sse[i : i + 1])]
    assert out == [b'event: a\ndata: {"x":1}\n\n', b"data: [DONE]\r\n\r\n"] and not sp.buf
    assert [is_terminal(e, "sse") for e in out] == [False, True]
    frames = es.event("contentBlockDelta", {"d": 1}) + es.event("metadata", {"usage": {}})
    sp = EventSplitter("eventstream")
    got = sp.feed(frames[:7]) + sp.feed(frames[7:])
    assert b"".join(got) == frames and len(got) == 2
    assert [is_terminal(e, "eventstream") for e in got] == [False, True]


def test_redaction_hides_every_credential() -> None:
    headers = [
        ("Authorization", f"Bearer {SECRET}"),
        ("x-api-key", SECRET),
        ("api-key", SECRET),
        ("x-goog-api-key", SECRET),
        ("X-Amz-Security-Token", SECRET),
        ("content-type", "application/json"),
    ]
    shown = redact_headers(headers)
    assert SECRET not in repr(shown) and ("content-type", "application/json") in shown
    target = redact_target("/v1beta/models/m:generateContent", f"alt=sse&key={SECRET}")
    assert SECRET not in target and "alt=sse" in target


def test_hop_by_hop_headers_are_dropped() -> None:
    h = httpx.Headers(
        [
            ("Connection", "keep-alive, x-private"),
            ("X-Private", "1"),
            ("Keep-Alive", "5"),
            ("Transfer-Encoding", "chunked"),
            ("X-Kept", "yes"),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
        ]
    )
    assert end_to_end(h) == [("x-kept", "yes"), ("set-cookie", "a=1"), ("set-cookie", "b=2")]


# --- a recording upstream ------------------------------------------------------------


class Upstream:
    """Echoes what it received; ``/stream`` sends one event, waits for ``gate``, ends."""

    def __init__(self) -> None:
        self.seen: list[dict] = []
        self.gate = asyncio.Event()
        self.finished = asyncio.Event()

    async def echo(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(
            {
                "method": request.method,
                "raw_path": request.raw_path,
                "headers": list(request.headers.items()),
                "body": body,
            }
        )
        if request.path == "/stream":
            return await self.stream(request)
        if request.path == "/gzip":
            data = gzip.compress(b'{"hello": "compressed"}')
            return web.Response(body=data, headers={"Content-Encoding": "gzip"})
        headers = [("X-Upstream", "1"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")]
        headers += [("Connection", "x-hop"), ("X-Hop", "private")]
        resp = web.Response(status=207, body=body[::-1], headers=None)
        for k, v in headers:
            resp.headers.add(k, v)
        return resp

    async def stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"n":1}\n\n')
        await self.gate.wait()
        await resp.write(b'data: {"n":2}\n\ndata: [DONE]\n\n')
        await resp.write_eof()
        self.finished.set()
        return resp


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[Upstream, str]]:
    up = Upstream()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", up.echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield up, f"http://127.0.0.1:{runner.addresses[0][1]}"
    up.gate.set()
    await runner.cleanup()


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def test_pass_through_is_byte_exact(upstream, method) -> None:
    """Any method and path: body bytes, query, every header (repeated ones, keys) reach
    the upstream unchanged; its status, headers and body come back, hop-by-hop removed."""
    up, url = upstream
    proxy = await start_chaos_proxy(url, NO_FAULTS)
    body = bytes(range(256)) * 3
    try:
        async with httpx.AsyncClient() as c:
            r = await c.request(
                method,
                f"{proxy.url}/some/path%2Fenc?b=2&a=1&a=3",
                content=body,
                headers=[
                    ("Authorization", f"Bearer {SECRET}"),
                    ("x-api-key", SECRET),
                    ("X-Multi", "1"),
                    ("X-Multi", "2"),
                ],
            )
    finally:
        await proxy.stop()
    seen = up.seen[-1]
    assert seen["method"] == method and seen["raw_path"] == "/some/path%2Fenc?b=2&a=1&a=3"
    assert seen["body"] == body
    assert ("Authorization", f"Bearer {SECRET}") in seen["headers"]
    assert [v for k, v in seen["headers"] if k.lower() == "x-multi"] == ["1", "2"]
    assert r.status_code == 207 and r.content == body[::-1]
    assert r.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert r.headers["x-upstream"] == "1" and "x-hop" not in r.headers


async def test_encoded_body_passes_through_still_encoded(upstream) -> None:
    _up, url = upstream
    proxy = await start_chaos_proxy(url, NO_FAULTS)
    try:
        async with httpx.AsyncClient() as c:
            r = await c.get(f"{proxy.url}/gzip", headers={"Accept-Encoding": "gzip"})
    finally:
        await proxy.stop()
    assert r.headers["content-encoding"] == "gzip" and r.json() == {"hello": "compressed"}


async def test_stream_chunks_are_relayed_before_the_upstream_finishes(upstream) -> None:
    """The first event reaches the client while the upstream is still held open by the
    test: nothing is buffered. Also true with a stream fault planned (event relay)."""
    up, url = upstream
    slow = scenario({"from": 0, "path": "/stream", "faults": [{"kind": "no_done", "seconds": 0}]})
    for sc in (NO_FAULTS, slow):
        up.gate.clear()
        up.finished.clear()
        proxy = await start_chaos_proxy(url, sc)
        try:
            async with (
                httpx.AsyncClient() as c,
                c.stream("POST", f"{proxy.url}/stream", json={"stream": True}) as r,
            ):
                chunks = r.aiter_raw()
                first = await asyncio.wait_for(chunks.__anext__(), 5.0)
                assert first == b'data: {"n":1}\n\n' and not up.finished.is_set()
                up.gate.set()
                rest = b"".join([c async for c in chunks])
        finally:
            await proxy.stop()
        done = b"data: [DONE]\n\n"
        assert rest.startswith(b'data: {"n":2}\n\n')
        assert rest.endswith(done) is (sc is NO_FAULTS)


async def test_simulator_stream_passes_through_unchanged(sim) -> None:
    """Against the simulator: status, content type, request id and every SSE event."""
    proxy = await start_chaos_proxy(sim.url, NO_FAULTS)
    try:
        async with httpx.AsyncClient() as c:
            r = await c.post(
                f"{proxy.url}/anthropic-us-east/v1/messages", json=anthropic_body(stream=True)
            )
    finally:
        await proxy.stop()
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["request-id"] == (await sim_attempts(sim))[-1].request_id
    kinds = [e for e, _ in json_events(r.text)]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"


async def sim_attempts(sim):
    async with sim.admin() as admin:
        return await admin.attempts()


# --- timeline --------------------------------------------------------------------------


async def test_timeline_phases_switch_at_their_boundaries(sim) -> None:
    """The bench drill file on a fake clock: healthy, 529 from t=15 s (not forwarded),
    healthy again at t=40 s; the admin endpoint shows phase and counts; a restart
    (?at=) moves the timeline."""
    clock = FakeClock()
    sc = load_proxy_scenario(ROOT / "bench/scenarios/hard_primary_outage.yaml")
    proxy = await start_chaos_proxy(sim.url, sc, clock=clock)
    url = f"{proxy.url}/anthropic-us-east/v1/messages"
    got: list[tuple[float, int, str]] = []
    try:
        async with httpx.AsyncClient() as c:
            for t in (0.0, 14.9, 15.0, 39.9, 40.0):
                clock.set(proxy.state.timeline.started_at + t)
                r = await c.post(url, json=anthropic_body())
                phase = (await c.get(f"{proxy.url}/_chaos/status")).json()["phase"]
                got.append((t, r.status_code, phase))
            status = (await c.get(f"{proxy.url}/_chaos/status")).json()
            restarted = (await c.post(f"{proxy.url}/_chaos/restart?at=20")).json()
            r = await c.post(url, json=anthropic_body())
    finally:
        await proxy.stop()
    assert got == [
        (0.0, 200, "before"),
        (14.9, 200, "before"),
        (15.0, 529, "fault"),
        (39.9, 529, "fault"),
        (40.0, 200, "after"),
    ]
    counts = status["counts"]
    assert counts["requests"] == 5 and counts["passed_through"] == 3
    assert counts["faults"] == {"http_error_529": 2}
    assert len([a for a in await sim_attempts(sim) if a.endpoint == "anthropic-us-east"]) == 3
    assert restarted["phase"] == "fault" and restarted["elapsed_s"] == 20.0
    assert r.status_code == 529 and r.json()["error"]["type"] == "overloaded_error"


async def test_secrets_never_reach_logs_or_admin_output(upstream, caplog) -> None:
    """Keys in headers, in Gemini's ?key= and in the upstream URL's userinfo appear in no
    log line (DEBUG included), no startup line and no admin answer."""
    up, url = upstream
    sc = scenario(
        {"from": 0, "path": "/v1/fault*", "answers": 429},
        {"from": 0, "path": "/stream", "faults": [{"kind": "stream_cut", "after_tokens": 1}]},
    )
    up.gate.set()
    with_userinfo = url.replace("http://", f"http://user:{SECRET}@")
    proxy = await start_chaos_proxy(with_userinfo, sc)
    caplog.set_level(logging.DEBUG, logger="agent_failover.chaos_proxy")
    headers = {"Authorization": f"Bearer {SECRET}", "x-goog-api-key": SECRET, "api-key": SECRET}
    try:
        async with httpx.AsyncClient(headers=headers) as c:
            ok = await c.post(f"{proxy.url}/v1/models/m:generateContent?key={SECRET}", json={})
            faulted = await c.post(f"{proxy.url}/v1/fault?key={SECRET}", json={})
            with pytest.raises(httpx.HTTPError):
                await c.post(f"{proxy.url}/stream", json={"stream": True})
            admin = (await c.get(f"{proxy.url}/_chaos/status")).text
        startup = "\n".join(describe_startup(proxy))
    finally:
        await proxy.stop()
    assert ok.status_code == 207 and faulted.status_code == 429
    assert len(caplog.records) >= 4  # one line per request, plus the DEBUG header dumps
    assert "<redacted>" in caplog.text and "generateContent" in caplog.text
    for text in (caplog.text, admin, startup):
        assert SECRET not in text
    assert any(("x-goog-api-key", SECRET) == (k.lower(), v) for k, v in up.seen[0]["headers"])


async def test_stop_releases_held_requests_and_unreachable_upstream_is_502(upstream) -> None:
    """A request held by ``hang`` (no end) is released when the proxy stops, which
    takes well under its shutdown timeout; a dead upstream answers 502, key-free."""
    _up, url = upstream
    sc = scenario({"from": 0, "path": "/held", "faults": [{"kind": "hang"}]})
    proxy = await start_chaos_proxy(url, sc)
    async with httpx.AsyncClient() as c:
        held = asyncio.create_task(c.post(f"{proxy.url}/held", json={}))
        async with asyncio.timeout(5):
            while proxy.state.stats.inflight == 0:  # noqa: ASYNC110 - no event to await
                await asyncio.sleep(0.01)
        t0 = asyncio.get_running_loop().time()
        await proxy.stop()
        assert asyncio.get_running_loop().time() - t0 < 1.5
        with pytest.raises(httpx.HTTPError):
            await held
    assert proxy.state.stats.outcomes["server_shutdown"] == 1

    dead = await start_chaos_proxy(f"http://user:{SECRET}@127.0.0.1:9", NO_FAULTS)
    try:
        async with httpx.AsyncClient() as c:
            r = await c.get(f"{dead.url}/v1/models")
    finally:
        await dead.stop()
    assert r.status_code == 502 and r.json()["error"]["type"] == "bad_gateway"
    assert SECRET not in r.text and dead.state.stats.upstream_errors == 1
