"""A local on-call webhook receiver: records escalation notifications, checks signatures.

``failover webhook-receiver`` runs it in the foreground and prints each notification; the
demo and the tests start one on a free port of 127.0.0.1 and point the worker at it
(``FAILOVER_ESCALATION_WEBHOOK_URL``). With a secret it verifies ``X-Failover-Signature``
(:func:`resilience.notify.verify_webhook_signature`) and answers 401 to a body it cannot verify;
:meth:`WebhookReceiver.fail_next` makes it answer chosen statuses first (500 → Temporal
retries, 400 → the activity gives up), to test the retry path.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from agent_failover.resilience.notify import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    SignatureError,
    verify_webhook_signature,
)

#: Bodies above this are refused (a notification is a few KB).
MAX_BODY_BYTES = 256 * 1024


@dataclass
class Received:
    """One request the receiver accepted or refused, and why."""

    status: int
    payload: dict[str, Any] | None
    delivery: str
    verified: bool | None  # None: no secret configured, nothing to verify
    error: str | None = None
    at: float = field(default_factory=time.time)

    @property
    def event(self) -> str:
        return str((self.payload or {}).get("event", "?"))


class WebhookReceiver:
    """An aiohttp server on ``host:port`` (0: a free port) that records what it receives."""

    def __init__(
        self,
        secret: str | None = None,
        *,
        path: str = "/",
        on_receive: Callable[[Received], None] | None = None,
        tolerance_s: float = 300.0,
    ) -> None:
        self.secret = secret
        self.path = path
        self.received: list[Received] = []
        self._on_receive = on_receive
        self._tolerance_s = tolerance_s
        self._scripted: list[int] = []
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Condition()
        self.url = ""

    def fail_next(self, statuses: Iterable[int]) -> None:
        """Answer the next requests with these statuses (in order), recording them."""
        self._scripted.extend(statuses)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post(self.path, self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = site._server.sockets[0].getsockname()  # type: ignore[union-attr]
        self.url = f"http://{host}:{bound[1]}{self.path}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> WebhookReceiver:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def accepted(self, event: str | None = None, workflow_id: str | None = None) -> list[Received]:
        """Notifications answered 2xx, optionally of one event and one workflow."""
        return [
            r
            for r in self.received
            if r.status < 300
            and (event is None or r.event == event)
            and (workflow_id is None or (r.payload or {}).get("workflow_id") == workflow_id)
        ]

    async def wait_for(
        self, event: str, workflow_id: str | None = None, timeout_s: float = 10.0
    ) -> Received:
        """The first accepted ``event`` (of ``workflow_id``), waiting up to ``timeout_s``."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: bool(self.accepted(event, workflow_id))),
                timeout_s,
            )
        return self.accepted(event, workflow_id)[0]

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        delivery = request.headers.get(DELIVERY_HEADER, "")
        status, error, verified = 200, None, None
        if self.secret:
            try:
                verify_webhook_signature(
                    self.secret,
                    request.headers.get(SIGNATURE_HEADER),
                    body,
                    now=time.time(),
                    tolerance_s=self._tolerance_s,
                )
                verified = True
            except SignatureError as exc:
                status, error, verified = 401, str(exc), False
        try:
            payload = json.loads(body)
        except ValueError:
            payload, status, error = None, 400, "body is not JSON"
        if status == 200 and self._scripted:
            status, error = self._scripted.pop(0), "scripted failure"
        got = Received(status, payload, delivery, verified, error)
        self.received.append(got)
        if self._on_receive is not None:
            self._on_receive(got)
        async with self._changed:
            self._changed.notify_all()
        return web.json_response({"ok": status < 300, "error": error}, status=status)
