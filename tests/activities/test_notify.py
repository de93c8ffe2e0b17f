"""The escalation webhook activity: a signed POST a receiver verifies, failures classified
once (5xx/408/429 retryable, other 4xx not), a no-op without a URL, no secret in errors."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agent_failover.activities.notify import (
    EscalationNotifier,
    WebhookSettings,
)
from agent_failover.resilience.notify import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    EscalationNotice,
    NoticeStep,
    verify_webhook_signature,
)
from agent_failover.testing.webhook_receiver import WebhookReceiver

SECRET = "s3cret"
NOTICE = EscalationNotice(
    event="escalation.opened",
    namespace="default",
    workflow_id="pipe-1",
    run_id="run-1",
    round=1,
    occurred_at=1_790_000_000.0,
    reason="planner: static fallback",
    blocked_steps=[
        NoticeStep(step="planner", role="planner", trigger="static_fallback", reason="x")
    ],
    timeout_s=60.0,
    timeout_action="fail",
)


async def test_receiver_gets_a_signed_payload_it_verifies() -> None:
    """Real HTTP on 127.0.0.1: the receiver checks the HMAC and gets the documented body."""
    async with WebhookReceiver(SECRET) as rx, httpx.AsyncClient() as http:
        notifier = EscalationNotifier(
            http, WebhookSettings(url=rx.url, secret=SECRET, ui_url="http://ui:8233")
        )
        res = await ActivityEnvironment().run(notifier.notify, NOTICE)
        assert res.delivered and res.status == 200 and not res.skipped and res.round == 1
        [got] = rx.received
        assert got.verified is True and got.status == 200
        assert got.delivery == "pipe-1/run-1/1/opened"
        p = got.payload or {}
        assert p["event"] == "escalation.opened" and p["run_id"] == "run-1"
        assert p["ui_url"].startswith("http://ui:8233/namespaces/default/workflows/pipe-1/")
        assert p["resolve_command"] == "failover resolve pipe-1 accept_degraded"


async def test_wrong_secret_is_refused_and_not_retried() -> None:
    """A receiver with another secret answers 401: a non-retryable rejection."""
    async with WebhookReceiver("other") as rx, httpx.AsyncClient() as http:
        notifier = EscalationNotifier(http, WebhookSettings(url=rx.url, secret=SECRET))
        with pytest.raises(ApplicationError) as info:
            await notifier.notify(NOTICE)
        assert info.value.type == "webhook_rejected" and info.value.non_retryable
        assert rx.received[0].verified is False and "does not match" in (rx.received[0].error or "")


def _notifier(
    handler, url: str = "https://hooks.test/services/T0/B0/tok3n"
) -> tuple[EscalationNotifier, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(record))
    settings = WebhookSettings(url=url, secret=SECRET)
    return EscalationNotifier(http, settings, clock=lambda: 1_790_000_000.0), seen


@pytest.mark.parametrize(
    ("response", "error_type", "non_retryable"),
    [
        (httpx.Response(500, text="boom"), "webhook_unavailable", False),
        (httpx.Response(503), "webhook_unavailable", False),
        (httpx.Response(408), "webhook_unavailable", False),
        (httpx.Response(429, headers={"retry-after": "7"}), "webhook_rate_limited", False),
        (httpx.Response(400, text="bad"), "webhook_rejected", True),
        (httpx.Response(404), "webhook_rejected", True),
        (httpx.Response(301, headers={"location": "http://x"}), "webhook_rejected", True),
    ],
)
async def test_failures_are_classified_once(
    response: httpx.Response, error_type: str, non_retryable: bool
) -> None:
    """One attempt per call; the status decides whether Temporal may retry; the URL's
    token never appears in the error (it would enter history)."""
    notifier, seen = _notifier(lambda r: response)
    with pytest.raises(ApplicationError) as info:
        await notifier.notify(NOTICE)
    err = info.value
    assert (err.type, err.non_retryable) == (error_type, non_retryable)
    assert len(seen) == 1 and "tok3n" not in str(err) and "hooks.test" in str(err)
    if response.status_code == 429:
        assert err.next_retry_delay is not None and err.next_retry_delay.total_seconds() == 7


async def test_transport_failures_are_retryable() -> None:
    """Refused connections and timeouts are worth another attempt."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    for handler, kind in ((refuse, "webhook_connect_error"), (slow, "webhook_timeout")):
        notifier, _ = _notifier(handler)
        with pytest.raises(ApplicationError) as info:
            await notifier.notify(NOTICE)
        assert info.value.type == kind and not info.value.non_retryable


async def test_headers_sign_the_exact_body() -> None:
    """Event, delivery id and a signature over the raw bytes sent, at the clock's time."""
    notifier, seen = _notifier(lambda r: httpx.Response(204))
    res = await notifier.notify(NOTICE)
    assert res.delivered and res.status == 204
    req = seen[0]
    assert req.headers["X-Failover-Event"] == "escalation.opened"
    assert req.headers[DELIVERY_HEADER] == "pipe-1/run-1/1/opened"
    assert verify_webhook_signature(
        SECRET, req.headers[SIGNATURE_HEADER], req.content, now=1_790_000_000
    )
    assert json.loads(req.content)["workflow_id"] == "pipe-1"


async def test_unsigned_without_a_secret() -> None:
    """No secret configured: no signature header (the receiver decides whether to accept)."""
    seen: list[httpx.Request] = []
    http = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(200))
    )
    await EscalationNotifier(http, WebhookSettings(url="http://h.test/")).notify(NOTICE)
    assert SIGNATURE_HEADER not in seen[0].headers


async def test_no_url_is_a_no_op_that_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without FAILOVER_ESCALATION_WEBHOOK_URL nothing is sent and the result says why."""
    monkeypatch.delenv("FAILOVER_ESCALATION_WEBHOOK_URL", raising=False)
    notifier, seen = _notifier(lambda r: httpx.Response(200))
    notifier._settings = None  # read the (empty) environment, as a worker does
    res = await notifier.notify(NOTICE)
    assert res.skipped and not res.delivered and seen == []
    assert "FAILOVER_ESCALATION_WEBHOOK_URL is not set" in res.detail


async def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """URL, secret and UI base are read at call time from the worker's environment."""
    monkeypatch.setenv("FAILOVER_ESCALATION_WEBHOOK_URL", " http://h.test/x ")
    monkeypatch.setenv("FAILOVER_ESCALATION_WEBHOOK_SECRET", "k")
    monkeypatch.setenv("TEMPORAL_UI_URL", "http://ui")
    assert WebhookSettings.from_env() == WebhookSettings("http://h.test/x", "k", "http://ui")


async def test_a_url_that_is_not_http_is_misconfigured() -> None:
    """A typo in the URL is not retried for ten minutes: it fails at once, naming the fix."""
    notifier, seen = _notifier(lambda r: httpx.Response(200), url="hooks.test/path")
    with pytest.raises(ApplicationError) as info:
        await notifier.notify(NOTICE)
    assert info.value.type == "webhook_misconfigured" and info.value.non_retryable
    assert seen == [] and "FAILOVER_ESCALATION_WEBHOOK_URL" in str(info.value)


async def test_receiver_refuses_a_stale_signature() -> None:
    """A replayed body (its timestamp beyond the tolerance) gets 401 from the receiver."""
    async with WebhookReceiver(SECRET) as rx, httpx.AsyncClient() as http:
        old = EscalationNotifier(
            http, WebhookSettings(url=rx.url, secret=SECRET), clock=lambda: time.time() - 3600
        )
        with pytest.raises(ApplicationError):
            await old.notify(NOTICE)
        assert rx.received[0].status == 401 and "away from now" in (rx.received[0].error or "")


async def test_each_attempt_adds_a_span_event() -> None:
    """Delivered and failed attempts each leave an event on the activity's span."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    ok, _ = _notifier(lambda r: httpx.Response(200))
    down, _ = _notifier(lambda r: httpx.Response(503))
    with tracer.start_as_current_span("RunActivity:notify_escalation"):
        await ok.notify(NOTICE)
        with pytest.raises(ApplicationError):
            await down.notify(NOTICE)
    [span] = exporter.get_finished_spans()
    got = [(e.name, e.attributes["failover.outcome"]) for e in span.events]
    assert got == [
        ("failover.escalation.notified", "200"),
        ("failover.escalation.notify_failed", "webhook_unavailable"),
    ]
    assert span.events[0].attributes["server.address"] == "hooks.test"
