"""The escalation webhook honours the proxy env vars; the providers' client does not.

A tiny forward proxy on 127.0.0.1 (aiohttp) records each absolute-form request line and
forwards it to the local webhook receiver, so the signature is still verified end to end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import httpx
import pytest
from aiohttp import web
from temporalio.testing import ActivityEnvironment

from agent_failover.activities.notify import (
    EscalationNotifier,
    WebhookSettings,
    build_webhook_client,
)
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.plugin import FailoverPlugin
from agent_failover.providers.client import build_http_client
from agent_failover.service import WorkerDeps
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.factory import Stores
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.testing.webhook_receiver import WebhookReceiver
from tests.activities.test_notify import NOTICE, SECRET

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
#: Hop-by-hop headers a proxy must not forward.
HOP_BY_HOP = {"proxy-connection", "connection", "keep-alive", "host", "transfer-encoding"}


class ForwardProxy:
    """Records ``METHOD absolute-url`` of each request and forwards it (plain HTTP only)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        target = request.raw_path  # the request-target as sent: absolute-form via a proxy
        self.seen.append(f"{request.method} {target}")
        if not target.startswith("http://127.0.0.1:"):
            return web.Response(status=200, text="proxied")  # never leaves the machine
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with aiohttp.ClientSession() as session:
            async with session.request(
                request.method, target, data=await request.read(), headers=headers
            ) as upstream:
                return web.Response(status=upstream.status, body=await upstream.read())

    async def __aenter__(self) -> ForwardProxy:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def proxy(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ForwardProxy]:
    """A local proxy named by HTTP_PROXY; every other proxy variable cleared."""
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    async with ForwardProxy() as p:
        monkeypatch.setenv("HTTP_PROXY", p.url)
        yield p


async def _notify(http: httpx.AsyncClient, url: str) -> bool:
    notifier = EscalationNotifier(http, WebhookSettings(url=url, secret=SECRET))
    res = await ActivityEnvironment().run(notifier.notify, NOTICE)
    return res.delivered


async def test_webhook_goes_through_http_proxy(proxy: ForwardProxy) -> None:
    async with WebhookReceiver(SECRET) as rx, build_webhook_client() as http:
        assert await _notify(http, rx.url)
    assert proxy.seen == [f"POST {rx.url}"]  # absolute-form: the proxy saw it
    [got] = rx.received
    assert got.verified is True  # the signature survives the hop


async def test_no_proxy_bypasses_the_proxy(
    proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "example.org,127.0.0.1")
    async with WebhookReceiver(SECRET) as rx, build_webhook_client() as http:
        assert await _notify(http, rx.url)
    assert proxy.seen == []
    assert [r.verified for r in rx.received] == [True]


async def test_provider_client_ignores_proxy_env(proxy: ForwardProxy) -> None:
    """Provider calls stay direct (per-origin pools): the proxy variables do not apply."""
    async with WebhookReceiver(SECRET) as rx, build_http_client() as http:
        resp = await http.post(rx.url, content=b"{}")
    assert resp.status_code in (200, 401) and proxy.seen == []
    assert len(rx.received) == 1


async def test_plugin_uses_its_own_proxy_aware_notify_client(proxy: ForwardProxy) -> None:
    plugin = FailoverPlugin(DEFAULT_POLICY_PATH, stores="memory", start_monitor=False)
    notify_http = plugin.notify_http
    assert notify_http is not plugin.http
    async with WebhookReceiver(SECRET) as rx:
        assert await _notify(notify_http, rx.url)
        assert len(proxy.seen) == 1
        await plugin.http.post(rx.url, content=b"{}")
        assert len(proxy.seen) == 1  # the providers' client went direct
    await plugin.aclose()
    assert notify_http.is_closed and plugin.http.is_closed


async def test_plugin_leaves_an_injected_notify_client_open() -> None:
    async with httpx.AsyncClient() as mine:
        plugin = FailoverPlugin(
            DEFAULT_POLICY_PATH, stores="memory", start_monitor=False, notify_http=mine
        )
        assert plugin.notify_http is mine
        await plugin.aclose()
        assert not mine.is_closed


async def test_worker_deps_close_the_notify_client() -> None:
    plugin = FailoverPlugin(DEFAULT_POLICY_PATH, stores="memory", start_monitor=False)
    deps = WorkerDeps(
        plugin.policy,
        plugin.http,
        Stores(MemoryHealthStore(), MemoryResponseCache(), "memory"),
    )
    assert deps.notify_http is not deps.http
    await deps.close()
    assert deps.notify_http.is_closed and deps.http.is_closed
