"""The adapters over a real loopback socket: mounted pools, h11 streaming, real deadlines.

A minimal aiohttp app on 127.0.0.1 (not the simulator, which has its own suite) serves
an OpenAI-style stream, a stream that stalls after one token, and a 429. This checks what
MockTransport cannot: that the per-origin mounts route real requests and that the
budgets hold against a real socket.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from agent_failover.providers.client import Budgets, build_http_client
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, Message
from tests.providers.wire import SENTINEL_KEY, endpoint, openai_stream

Q = ChatRequest(messages=[Message(role="user", content="q")])


async def _chat(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    assert request.headers["authorization"] == f"Bearer {SENTINEL_KEY}"
    body = await request.json()
    if name == "limited":
        return web.json_response(
            {"error": {"type": "rate_limit_error", "message": "slow down"}},
            status=429,
            headers={"retry-after": "3"},
        )
    assert body["stream"] is True
    resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await resp.prepare(request)
    chunks = openai_stream(["Hello", " loopback"])
    if name == "stall":
        await resp.write(chunks[1])
        await asyncio.Event().wait()
    for c in chunks:
        await resp.write(c)
    await resp.write_eof()
    return resp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
async def server_port() -> AsyncIterator[int]:
    """A small aiohttp server in this event loop, for the module's tests."""
    app = web.Application()
    app.router.add_post("/{name}/v1/chat/completions", _chat)
    # The stall handler never returns: do not wait the default 60 s for it at cleanup.
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield port
    await runner.cleanup()


def ep(name: str, port: int):
    """An OpenAI-kind endpoint served by the loopback app."""
    return endpoint("openai-us", name=name, base_url=f"http://127.0.0.1:{port}/{name}/v1")


async def test_stream_over_real_socket(server_port):
    """A real SSE stream through the mounted pool yields the full reply."""
    eps = [ep("ok", server_port), ep("stall", server_port)]
    async with build_http_client(eps) as client:
        reply = await complete(client, eps[0], Q, Budgets(total_s=5))
    assert reply.text == "Hello loopback" and reply.usage.output_tokens == 20


async def test_stall_over_real_socket(server_port):
    """A real stream that goes silent fails within the idle budget."""
    e = ep("stall", server_port)
    async with build_http_client([e]) as client:
        with pytest.raises(E.StreamStalledError):
            await complete(client, e, Q, Budgets(idle_s=0.05, total_s=5))


async def test_rate_limit_over_real_socket(server_port):
    """A real 429 with Retry-After is RateLimitedError carrying the hint."""
    e = ep("limited", server_port)
    async with build_http_client([e]) as client:
        with pytest.raises(E.RateLimitedError) as info:
            await complete(client, e, Q, Budgets(total_s=5))
    assert info.value.retry_after == 3.0


async def test_refused_connection(server_port):
    """Nothing listening on the port is a ConnectError."""
    e = ep("ok", _free_port())
    async with build_http_client([e]) as client:
        with pytest.raises(E.ConnectError):
            await complete(client, e, Q, Budgets(total_s=5))
