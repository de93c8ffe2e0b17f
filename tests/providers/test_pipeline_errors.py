"""Every error class in the tree, raised by every adapter, streaming and not.

One table of scenarios runs against every wire format, on the vendors' APIs and on the
clouds (see ``wire.py``). Each
scenario asserts the exact error type, its decision, and that the sentinel key appears
in no str/repr/partial text.
"""

from __future__ import annotations

import httpx
import pytest

from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, Message
from tests.providers.wire import (
    OVERLOAD_KIND,
    SENTINEL_KEY,
    WIRES,
    Wire,
    endpoint,
    stream_response,
)

FAST = Budgets(connect_s=0.5, ttft_s=0.5, idle_s=0.5, total_s=2.0, trailer_grace_s=0.05)
WIRE_IDS = [w.name for w in WIRES]


def request(stream: bool) -> ChatRequest:
    """A small request, streaming or not."""
    return ChatRequest(messages=[Message(role="user", content="hi")], stream=stream)


def assert_no_key(err: BaseException) -> None:
    """The sentinel key is nowhere in the error's text forms."""
    assert SENTINEL_KEY not in str(err)
    assert SENTINEL_KEY not in repr(err)
    assert SENTINEL_KEY not in getattr(err, "partial_text", "")
    assert SENTINEL_KEY not in getattr(err, "message", "")


async def run(mock_client, wire: Wire, respond, *, stream: bool, budgets: Budgets = FAST):
    client, recorder = mock_client(respond)
    async with client:
        return await complete(client, endpoint(wire.name), request(stream), budgets), recorder


async def expect(mock_client, wire: Wire, respond, cls, *, stream: bool) -> E.ProviderError:
    with pytest.raises(E.ProviderError) as info:
        await run(mock_client, wire, respond, stream=stream)
    err = info.value
    assert type(err) is cls, f"{type(err).__name__}: {err}"
    assert err.endpoint == wire.name
    assert_no_key(err)
    return err


STATUS_CASES = [
    (
        429,
        {"error": {"type": "rate_limit_error", "message": "slow down"}},
        {"retry-after": "7"},
        E.RateLimitedError,
    ),
    (
        429,
        {"error": {"code": "insufficient_quota", "message": "You exceeded your quota"}},
        {},
        E.QuotaExhaustedError,
    ),
    (
        429,
        {
            "error": {
                "type": "rate_limit_error",
                "message": "You have reached your specified API usage spend limit",
            }
        },
        {},
        E.QuotaExhaustedError,
    ),
    (
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        {},
        E.OverloadedError,
    ),
    (
        503,
        {"error": {"code": 503, "status": "UNAVAILABLE", "message": "overloaded"}},
        {},
        E.OverloadedError,
    ),
    (500, {"error": {"type": "api_error", "message": "boom"}}, {}, E.ServerError),
    (502, "<html>bad gateway</html>", {}, E.ServerError),
    (504, "", {}, E.ServerError),
    (
        401,
        {"error": {"type": "authentication_error", "message": "invalid x-api-key"}},
        {},
        E.AuthError,
    ),
    (403, {"error": {"type": "permission_error", "message": "no"}}, {}, E.AuthError),
    (
        400,
        {"error": {"type": "invalid_request_error", "message": "bad field"}},
        {},
        E.InvalidRequestError,
    ),
    (
        404,
        {"error": {"type": "not_found_error", "message": "model not found"}},
        {},
        E.ModelNotFoundError,
    ),
    (
        400,
        {"error": {"code": "content_policy_violation", "message": "nope"}},
        {},
        E.ContentFilterError,
    ),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
@pytest.mark.parametrize(("status", "body", "headers", "cls"), STATUS_CASES)
async def test_status_errors(mock_client, wire, stream, status, body, headers, cls):
    """An error status maps to its class whatever the adapter or mode."""

    def respond(_):
        if isinstance(body, str):
            return httpx.Response(status, text=body, headers=headers)
        return httpx.Response(status, json=body, headers=headers)

    err = await expect(mock_client, wire, respond, cls, stream=stream)
    assert err.status == status
    if headers.get("retry-after"):
        assert err.retry_after == pytest.approx(7.0)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_context_length(mock_client, wire, stream):
    """Each vendor's own context-length wording becomes ContextLengthError (FAILOVER)."""
    err = await expect(
        mock_client,
        wire,
        lambda _: httpx.Response(400, json=wire.context_body),
        E.ContextLengthError,
        stream=stream,
    )
    assert err.decision is E.Decision.FAILOVER


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_content_filter_json(mock_client, wire):
    """A 200 reply stopped by the vendor's safety system raises ContentFilterError."""
    await expect(
        mock_client,
        wire,
        lambda _: httpx.Response(200, json=wire.filtered_json()),
        E.ContentFilterError,
        stream=False,
    )


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_content_filter_stream(mock_client, wire):
    """A stream ending in the vendor's safety stop raises ContentFilterError with partial text."""
    err = await expect(
        mock_client,
        wire,
        lambda _: stream_response(wire.filtered_stream(["Hello ", "wor"])),
        E.ContentFilterError,
        stream=True,
    )
    assert err.partial_text.startswith("Hello ")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (httpx.ConnectError("refused"), E.ConnectError),
        (httpx.ConnectTimeout("slow connect"), E.ConnectError),
        (httpx.RemoteProtocolError("server disconnected"), E.ConnectError),
        (httpx.ReadTimeout("no headers"), E.NoResponseError),
        (httpx.PoolTimeout("pool full"), E.LocalSaturationError),
    ],
    ids=["connect", "connect-timeout", "protocol", "read-timeout", "pool-timeout"],
)
async def test_transport_errors_before_headers(mock_client, wire, stream, exc, cls):
    """httpx failures before any response headers map to transport errors."""

    def respond(request):
        return type(exc)(str(exc), request=request)

    await expect(mock_client, wire, respond, cls, stream=stream)


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_stream_cut_before_terminal(mock_client, wire):
    """A stream whose body ends before the terminal event is a StreamCutError with partial text."""
    cut = wire.cut(wire.ok_stream(["Hello ", "world", "!"]))
    err = await expect(
        mock_client, wire, lambda _: stream_response(cut), E.StreamCutError, stream=True
    )
    assert err.partial_text.startswith("Hello ")
    assert err.decision is E.Decision.FAILOVER


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_connection_reset_mid_stream(mock_client, wire):
    """A read error after some tokens is a StreamCutError keeping what arrived."""
    chunks = wire.cut(wire.ok_stream(["Hello ", "world"]))

    async def body():
        for c in chunks:
            yield c
        raise httpx.ReadError("connection reset by peer")

    err = await expect(
        mock_client,
        wire,
        lambda _: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=body()
        ),
        E.StreamCutError,
        stream=True,
    )
    assert "Hello" in err.partial_text


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_malformed_stream(mock_client, wire):
    """More than three unparseable events fail the stream as MalformedStreamError."""
    chunks = wire.ok_stream(["a", "b"])
    garbage = [wire.garbage] * 4
    await expect(
        mock_client,
        wire,
        lambda _: stream_response([chunks[0], *garbage, *chunks[1:]]),
        E.MalformedStreamError,
        stream=True,
    )


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_one_malformed_event_is_skipped(mock_client, wire):
    """A single bad event is skipped and counted; the reply still completes."""
    chunks = wire.ok_stream(["Hello ", "world"])
    reply, _ = await run(
        mock_client,
        wire,
        lambda _: stream_response([chunks[0], wire.garbage, *chunks[1:]]),
        stream=True,
    )
    assert reply.text == "Hello world"
    assert reply.malformed_events_skipped == 1


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_error_event_overloaded(mock_client, wire):
    """An overloaded error event inside a 200 stream is StreamErrorEvent with COOLDOWN."""
    chunks = wire.cut(wire.ok_stream(["Hello ", "world"]))
    events = [*chunks, wire.error_event(OVERLOAD_KIND[wire.name])]
    err = await expect(
        mock_client, wire, lambda _: stream_response(events), E.StreamErrorEvent, stream=True
    )
    assert err.decision is E.Decision.COOLDOWN
    assert err.partial_text.startswith("Hello")


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_error_event_other(mock_client, wire):
    """A non-overload error event keeps the class default decision (FAILOVER)."""
    kind = {"gemini-flash": "INTERNAL", "vertex-gemini": "INTERNAL"}.get(wire.name, "api_error")
    event = wire.error_event(kind).replace(b'"code": 503', b'"code": 500')
    err = await expect(
        mock_client, wire, lambda _: stream_response([event]), E.StreamErrorEvent, stream=True
    )
    assert err.decision is E.Decision.FAILOVER


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_slow_first_token(mock_client, wire):
    """Headers arrive but no token within ttft: SlowFirstTokenError, without waiting for total."""
    budgets = Budgets(connect_s=0.5, ttft_s=0.03, idle_s=5, total_s=5)
    # Anthropic and Bedrock open with a message-start event that carries no token.
    opens = ("anthropic-us-east", "vertex-europe-west1", "bedrock-us-west-2")
    prelude = wire.ok_stream(["x"])[:1] if wire.name in opens else []
    with pytest.raises(E.SlowFirstTokenError) as info:
        await run(
            mock_client,
            wire,
            lambda _: stream_response(prelude, hang=True),
            stream=True,
            budgets=budgets,
        )
    assert_no_key(info.value)


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_stream_stalled(mock_client, wire):
    """Tokens then silence beyond idle: StreamStalledError with the partial text."""
    budgets = Budgets(connect_s=0.5, ttft_s=5, idle_s=0.03, total_s=5)
    chunks = wire.cut(wire.ok_stream(["Hello ", "world"]))
    with pytest.raises(E.StreamStalledError) as info:
        await run(
            mock_client,
            wire,
            lambda _: stream_response(chunks, hang=True),
            stream=True,
            budgets=budgets,
        )
    assert info.value.partial_text.startswith("Hello")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_no_response_headers(mock_client, wire, stream):
    """A server that never sends headers fails as NoResponseError within the budget."""
    budgets = Budgets(connect_s=0.5, ttft_s=0.03, idle_s=5, total_s=0.05)

    async def respond(_):
        await asyncio_hang()

    with pytest.raises(E.NoResponseError):
        await run(mock_client, wire, respond, stream=stream, budgets=budgets)


async def asyncio_hang() -> None:
    """Never return (until cancelled by the budget)."""
    import asyncio

    await asyncio.Event().wait()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_garbage_body(mock_client, wire, stream):
    """A 200 whose body is not the wire format fails as MalformedStreamError, never crashes."""
    if stream:
        respond = lambda _: stream_response([b"data: <html>\n\n"] * 5)  # noqa: E731
    else:
        respond = lambda _: httpx.Response(200, text="<html>oops</html>")  # noqa: E731
    await expect(mock_client, wire, respond, E.MalformedStreamError, stream=stream)


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_wrong_shape_json(mock_client, wire):
    """Valid JSON of the wrong shape is MalformedStreamError, not a KeyError."""
    await expect(
        mock_client,
        wire,
        lambda _: httpx.Response(200, json={"unexpected": True}),
        E.MalformedStreamError,
        stream=False,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_missing_key_env(mock_client, wire, stream, monkeypatch):
    """An unset key variable is AuthError naming the variable, before any request is sent."""
    monkeypatch.delenv("AGENT_FAILOVER_TEST_KEY")
    client, recorder = mock_client(lambda _: httpx.Response(200, json=wire.ok_json("x")))
    async with client:
        with pytest.raises(E.AuthError, match="AGENT_FAILOVER_TEST_KEY"):
            await complete(client, endpoint(wire.name), request(stream), FAST)
    assert recorder.requests == []


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_key_echoed_in_401_is_redacted(mock_client, wire):
    """A provider echoing the key in a 401 body never gets it into the error."""
    body = {"error": {"message": f"Incorrect API key provided: {SENTINEL_KEY}."}}
    err = await expect(
        mock_client, wire, lambda _: httpx.Response(401, json=body), E.AuthError, stream=False
    )
    assert "[redacted]" in err.message
