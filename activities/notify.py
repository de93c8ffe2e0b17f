"""The on-call webhook: one signed POST per escalation event, retried by Temporal.

``EscalationNotifier.notify`` posts :func:`resilience.notify.notification_payload` of its
notice as JSON to ``FAILOVER_ESCALATION_WEBHOOK_URL``, signed with
``FAILOVER_ESCALATION_WEBHOOK_SECRET`` when that is set (header ``X-Failover-Signature``),
with the Web UI link built from ``TEMPORAL_UI_URL``. All three are read from the worker's
environment when the activity runs (never from the workflow), so a URL with a token in its
path (Slack, PagerDuty) and the secret never reach history; errors name the host only.
Without a URL the activity sends nothing and says so (``skipped``).

One attempt per activity execution; Temporal owns the retries. Each failure becomes one
``ApplicationError``::

    ApplicationError(type=...)
    ├── webhook_unavailable   5xx, 408                           retryable
    ├── webhook_timeout       no answer within the timeout       retryable
    ├── webhook_connect_error refused / reset / DNS              retryable
    ├── webhook_rate_limited  429 (Retry-After → next_retry_delay)  retryable
    ├── webhook_rejected      other 4xx, 3xx                     non-retryable
    └── webhook_misconfigured URL that is not http(s)            non-retryable

The POST goes through the notifier's own client (:func:`build_webhook_client`), not the
providers' one: it honours ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY``,
so a worker that reaches the internet only through an egress proxy still pages on-call,
while provider calls keep their direct, per-origin pools.

Every attempt adds a span event (``failover.escalation.notified`` or
``failover.escalation.notify_failed``) to the activity's span.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_failover.resilience.notify import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    EscalationNotice,
    NotifyResult,
    delivery_id,
    notification_payload,
    sign,
)
from agent_failover.telemetry import names
from agent_failover.telemetry.spans import event

if TYPE_CHECKING:
    import httpx

WEBHOOK_URL_ENV = "FAILOVER_ESCALATION_WEBHOOK_URL"
WEBHOOK_SECRET_ENV = "FAILOVER_ESCALATION_WEBHOOK_SECRET"
UI_URL_ENV = "TEMPORAL_UI_URL"
#: Seconds one POST may take (the activity's start-to-close timeout is above it).
WEBHOOK_TIMEOUT_S = 10.0

WEBHOOK_UNAVAILABLE = "webhook_unavailable"
WEBHOOK_TIMEOUT = "webhook_timeout"
WEBHOOK_CONNECT_ERROR = "webhook_connect_error"
WEBHOOK_RATE_LIMITED = "webhook_rate_limited"
WEBHOOK_REJECTED = "webhook_rejected"
WEBHOOK_MISCONFIGURED = "webhook_misconfigured"
#: Error types a retry cannot fix: the receiver refused the request, or the URL is wrong.
NON_RETRYABLE_WEBHOOK_ERRORS = (WEBHOOK_REJECTED, WEBHOOK_MISCONFIGURED)
#: 4xx statuses that mean "try again later", not "this request is wrong".
RETRYABLE_4XX = (408, 429)


#: Connections the webhook client keeps: one POST per escalation event, rarely concurrent.
WEBHOOK_MAX_CONNECTIONS = 10


def build_webhook_client() -> httpx.AsyncClient:
    """The escalation webhook's HTTP client, separate from the providers' client.

    ``trust_env=True``: the standard proxy variables (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``ALL_PROXY``, ``NO_PROXY``) and ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` apply, read when
    the client is built (at worker start). No redirects (a webhook that redirects is
    misconfigured), no retries (Temporal owns them). Close it on shutdown.
    """
    import httpx  # worker side: workflow code imports this module's names

    from agent_failover.providers.client import default_ssl_context

    return httpx.AsyncClient(
        trust_env=True,
        verify=default_ssl_context(),  # the process's shared context (same CA settings)
        timeout=httpx.Timeout(WEBHOOK_TIMEOUT_S),
        follow_redirects=False,
        limits=httpx.Limits(max_connections=WEBHOOK_MAX_CONNECTIONS, max_keepalive_connections=2),
    )


@dataclass(frozen=True)
class WebhookSettings:
    """Where notifications go, the signing secret, and the Web UI base for links."""

    url: str | None = None
    secret: str | None = None
    ui_url: str | None = None
    timeout_s: float = WEBHOOK_TIMEOUT_S

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WebhookSettings:
        env = os.environ if env is None else env
        return cls(
            url=(env.get(WEBHOOK_URL_ENV) or "").strip() or None,
            secret=env.get(WEBHOOK_SECRET_ENV) or None,
            ui_url=(env.get(UI_URL_ENV) or "").strip() or None,
        )


class EscalationNotifier:
    """Escalation notifications through ``http`` (the worker's :func:`build_webhook_client`).

    ``settings`` None (the worker's default) reads :class:`WebhookSettings` from the
    environment on every call, so a worker picks up a changed URL on restart only while
    tests and the demo can point a running worker at a local receiver.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        settings: WebhookSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._http = http
        self._settings = settings
        self._clock = clock

    @activity.defn(name="notify_escalation")
    async def notify(self, notice: EscalationNotice) -> NotifyResult:
        """Post one escalation event to the on-call webhook (a no-op without a URL)."""
        settings = self._settings or WebhookSettings.from_env()
        attempt = activity.info().attempt if activity.in_activity() else 1
        if settings.url is None:
            return NotifyResult(
                event=notice.event,
                round=notice.round,
                delivered=False,
                skipped=True,
                attempt=attempt,
                detail=f"{WEBHOOK_URL_ENV} is not set on the worker: no notification sent",
            )
        host = _host(settings.url)
        body = json.dumps(notification_payload(notice, settings.ui_url)).encode()
        try:
            status = await self._post(settings, notice, body)
        except ApplicationError as exc:
            _event(names.EV_ESCALATION_NOTIFY_FAILED, notice, attempt, exc.type, host)
            raise
        _event(names.EV_ESCALATION_NOTIFIED, notice, attempt, str(status), host)
        return NotifyResult(
            event=notice.event,
            round=notice.round,
            delivered=True,
            status=status,
            attempt=attempt,
            detail=f"HTTP {status} from {host}",
        )

    def all(self) -> list[Callable[..., Any]]:
        """Every activity of this class, for worker registration."""
        return [self.notify]

    async def _post(self, settings: WebhookSettings, notice: EscalationNotice, body: bytes) -> int:
        url = settings.url or ""
        host = _host(url)
        if urlsplit(url).scheme not in ("http", "https") or not host:
            raise _error(
                WEBHOOK_MISCONFIGURED,
                f"{WEBHOOK_URL_ENV} is not an http(s) URL: fix it on the worker",
            )
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "agent-failover-escalation/1",
            EVENT_HEADER: notice.event,
            DELIVERY_HEADER: delivery_id(notice),
        }
        if settings.secret:
            headers[SIGNATURE_HEADER] = sign(settings.secret, body, int(self._clock()))
        import httpx  # worker side

        try:
            resp = await self._http.post(
                url, content=body, headers=headers, timeout=httpx.Timeout(settings.timeout_s)
            )
        except httpx.TimeoutException as exc:
            raise _error(
                WEBHOOK_TIMEOUT, f"{host}: no answer within {settings.timeout_s:g}s"
            ) from exc
        except httpx.TransportError as exc:
            raise _error(WEBHOOK_CONNECT_ERROR, f"{host}: {type(exc).__name__}") from exc
        if 200 <= resp.status_code < 300:
            return resp.status_code
        raise _status_error(resp, host)


def _host(url: str) -> str:
    """The URL's host[:port] only: a webhook path often carries a token."""
    try:
        return urlsplit(url).netloc.rpartition("@")[2]
    except ValueError:
        return ""


def _status_error(resp: httpx.Response, host: str) -> ApplicationError:
    status = resp.status_code
    text = f"{host} answered HTTP {status}: {resp.text[:200]}"
    if status >= 500 or status == 408:
        return _error(WEBHOOK_UNAVAILABLE, text, status)
    if status == 429:
        return _error(WEBHOOK_RATE_LIMITED, text, status, _retry_after(resp.headers))
    return _error(WEBHOOK_REJECTED, text, status)


def _retry_after(headers: httpx.Headers) -> float | None:
    try:
        value = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    return min(value, 300.0) if value > 0 else None


def _error(
    error_type: str, message: str, status: int | None = None, retry_after_s: float | None = None
) -> ApplicationError:
    return ApplicationError(
        f"escalation webhook failed: {message}",
        {"status": status},
        type=error_type,
        non_retryable=error_type in NON_RETRYABLE_WEBHOOK_ERRORS,
        next_retry_delay=timedelta(seconds=retry_after_s) if retry_after_s else None,
    )


def _event(name: str, notice: EscalationNotice, attempt: int, outcome: str, host: str) -> None:
    event(
        name,
        {
            "failover.escalation.event": notice.event,
            "failover.escalation.round": notice.round,
            "failover.workflow_id": notice.workflow_id,
            "failover.attempt": attempt,
            "failover.outcome": outcome,
            "server.address": host,
        },
    )
