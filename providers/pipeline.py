"""The one call pipeline every provider shares: ``complete(adapter, ...)``, one attempt.

Given a :class:`~providers.wire.WireAdapter`, :func:`complete` starts the attempt (key and
secret headers from the environment, the route's signer), asks the adapter for the
body, headers and URL, and sends once over the one ``httpx.AsyncClient``: plain calls
are bounded by ``connect_s`` and ``total_s``, streams additionally by the first-token,
idle and trailer budgets (:mod:`providers.pump`), both by ``max_reply_bytes``. A
server that ignored ``stream`` and answered JSON is read as JSON. Every failure leaves
as exactly one :class:`~resilience.errors.ProviderError` with the partial text and with
the key, token and secret header values masked; nothing here retries.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from agent_failover.providers.base import (
    Call,
    ProgressCallback,
    parse_json_reply,
    prepare,
    raise_for_status,
    read_json_reply,
    send,
    slot,
)
from agent_failover.providers.client import Budgets
from agent_failover.providers.pump import pump
from agent_failover.providers.wire import ReplyParts, StreamState, WireAdapter
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.errors import ProviderError
from agent_failover.resilience.models import ChatReply, ChatRequest


async def complete(
    adapter: WireAdapter,
    client: httpx.AsyncClient,
    endpoint: EndpointConfig,
    request: ChatRequest,
    budgets: Budgets,
    *,
    on_progress: ProgressCallback | None = None,
    now: Callable[[], float] = time.time,
) -> ChatReply:
    """One attempt at ``request`` on ``endpoint`` in ``adapter``'s wire format.

    Streams when the request asks for it and the endpoint supports it.
    """
    call = Call.start(
        client,
        endpoint,
        request,
        budgets,
        on_progress=on_progress,
        now=now,
        prefix=adapter.prefix(request),
    )
    stream = call.streaming
    adapter.check(endpoint, stream=stream)
    body = adapter.body(endpoint, request, stream=stream)
    headers = adapter.headers(call.key, stream=stream)
    url = adapter.url(endpoint, stream=stream)

    def parse(payload: Any) -> ReplyParts:
        return adapter.parse_reply(call, payload)

    if not stream:
        return await run_json(call, url, headers, body, parse)
    return await run_stream(call, url, headers, body, adapter.stream_state(call), parse)


async def run_json(
    call: Call,
    url: str,
    headers: dict[str, str],
    body: Any,
    parse: Callable[[Any], ReplyParts],
) -> ChatReply:
    """One non-streaming attempt: bounded by ``connect_s`` and ``total_s``."""
    try:
        deadline = call.started + call.budgets.total_s
        request = await prepare(call, url, headers, body, deadline)
        async with slot(call):
            response = await send(call, request, deadline)
            try:
                await raise_for_status(call, response)
                raw = await read_json_reply(call, response, deadline)
            finally:
                await response.aclose()
        parts = parse_json_reply(call, raw, parse, response.status_code)
        reply = call.build_reply(parts, ttft_ms=None, malformed=0)
        await call.progress(reply.text, final=True)
        return reply
    except ProviderError as err:
        raise call.redact(err) from err.__cause__


async def run_stream(
    call: Call,
    url: str,
    headers: dict[str, str],
    body: Any,
    state: StreamState,
    parse: Callable[[Any], ReplyParts],
) -> ChatReply:
    """One streaming attempt with every budget enforced around every chunk.

    A server that ignored ``stream`` and answered with JSON is read with ``parse``.
    """
    try:
        b = call.budgets
        headers_deadline = call.started + min(b.ttft_s, b.total_s)
        request = await prepare(call, url, headers, body, headers_deadline)
        async with slot(call):
            response = await send(call, request, headers_deadline)
            try:
                await raise_for_status(call, response)
                ctype = response.headers.get("content-type", "").lower()
                if "json" in ctype and "event-stream" not in ctype:
                    raw = await read_json_reply(call, response, call.started + b.total_s)
                    parts = parse_json_reply(call, raw, parse, response.status_code)
                    reply = call.build_reply(parts, ttft_ms=call.elapsed_ms(), malformed=0)
                    await call.progress(reply.text, final=True)
                    return reply
                ttft_ms = await pump(call, response, state)
            finally:
                await response.aclose()
        parts = state.reply_parts()
        await call.progress(parts.text, final=True)
        return call.build_reply(parts, ttft_ms=ttft_ms, malformed=state.malformed)
    except ProviderError as err:
        raise call.redact(err) from err.__cause__
