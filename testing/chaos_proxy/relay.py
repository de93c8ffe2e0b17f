"""Relaying an upstream answer to the client, with the plan's body faults applied.

Without a body fault the upstream's bytes go out exactly as they arrive, chunk by chunk
(``aiter_raw``: nothing is decoded, buffered or reframed). With one, a streamed answer
(``text/event-stream`` or AWS ``application/vnd.amazon.eventstream``) is split into
events and each event is relayed as soon as it is complete, with the simulator's stream
faults applied at event offsets: ``after_tokens: N`` counts upstream events (a real
stream is about one token per event); a fault whose offset lies beyond the stream's end
happens before its terminal marker, as the simulator clamps it to the reply's length.
Injected events are the simulator's own renderings for the detected wire format, so an
adapter classifies them exactly as it does the simulator's. A non-streamed answer is
read whole (``stream_cut`` sends half of it, then drops the connection).
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import httpx
from aiohttp import web
from multidict import CIMultiDict

from agent_failover.testing.sim.clock import Clock
from agent_failover.testing.sim.faults import AttemptPlan
from agent_failover.testing.sim.handler import reset_connection
from agent_failover.testing.sim.wire import WireFormat
from agent_failover.testing.sim.wire.base import stream_error_from_fault

#: RFC 9110 §7.6.1 hop-by-hop headers: never forwarded in either direction.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_SSE_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_EVENTSTREAM = "application/vnd.amazon.eventstream"


def end_to_end(headers: httpx.Headers | Any, *drop: str) -> list[tuple[str, str]]:
    """Every header but the hop-by-hop ones (and those the Connection header names)."""
    items = headers.multi_items() if hasattr(headers, "multi_items") else list(headers.items())
    named = {t.strip().lower() for k, v in items if k.lower() == "connection" for t in v.split(",")}
    skip = HOP_BY_HOP | named | set(drop)
    return [(k, v) for k, v in items if k.lower() not in skip]


def stream_kind(content_type: str) -> str | None:
    """``sse``, ``eventstream`` or None (not a stream the proxy can split into events)."""
    ct = content_type.split(";", 1)[0].strip().lower()
    if ct == "text/event-stream":
        return "sse"
    if ct == _EVENTSTREAM:
        return "eventstream"
    return None


class EventSplitter:
    """Cuts a byte stream into whole events (SSE blocks or event-stream frames)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The events completed by ``chunk``, byte for byte."""
        self.buf += chunk
        out: list[bytes] = []
        while True:
            end = self._end()
            if end is None:
                return out
            out.append(self.buf[:end])
            self.buf = self.buf[end:]

    def _end(self) -> int | None:
        if self.kind == "sse":
            m = _SSE_END.search(self.buf)
            return None if m is None else m.end()
        if len(self.buf) < 4:
            return None
        total = struct.unpack(">I", self.buf[:4])[0]
        return total if 0 < total <= len(self.buf) else None


def is_terminal(event: bytes, kind: str) -> bool:
    """Whether ``event`` is a stream's terminal marker (withheld by ``no_done``)."""
    if kind == "eventstream":
        if len(event) < 12:
            return False
        head_len = struct.unpack(">I", event[4:8])[0]
        return b"\x0b:event-type\x07\x00\x08metadata" in event[12 : 12 + head_len]
    for line in event.splitlines():
        if line.strip() in (b"data: [DONE]", b"data:[DONE]", b"event: message_stop"):
            return True
    return False


def output_tokens(body: bytes) -> int:
    """Output tokens of a JSON reply from its usage block (else ~4 bytes per token)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return max(1, len(body) // 4)
    found = _usage_tokens(doc)
    return found if found is not None else max(1, len(body) // 4)


def _usage_tokens(doc: Any) -> int | None:
    keys = ("output_tokens", "completion_tokens", "candidatesTokenCount", "outputTokens")
    if isinstance(doc, dict):
        for k in keys:
            if isinstance(doc.get(k), int):
                return doc[k]
        items = list(doc.values())
    elif isinstance(doc, list):
        items = doc
    else:
        return None
    for v in items:
        n = _usage_tokens(v)
        if n is not None:
            return n
    return None


@dataclass
class RelayContext:
    """What a relay needs besides the two ends: time, the wire's renderings, a hold."""

    clock: Clock
    wire: WireFormat
    model: str
    hold: Callable[[float | None], Awaitable[bool]]


def body_faults(plan: AttemptPlan) -> bool:
    """Whether the plan touches the answer's bytes or their timing."""
    return bool(
        plan.first_byte_delay_s
        or plan.tokens_per_sec
        or plan.stream_cut
        or plan.stream_stall
        or plan.malformed_chunk
        or plan.no_done
        or plan.stream_error_event
    )


async def relay(
    request: web.Request, upstream: httpx.Response, plan: AttemptPlan, ctx: RelayContext
) -> tuple[web.StreamResponse, str]:
    """Answer ``request`` with ``upstream``; the response and how the relay ended."""
    kind = stream_kind(upstream.headers.get("content-type", ""))
    ok = 200 <= upstream.status_code < 300
    if not ok or not body_faults(plan):
        return await _pass_through(request, upstream), "passed"
    if kind is None:
        return await _relay_body(request, upstream, plan, ctx)
    return await _relay_events(request, upstream, plan, ctx, kind)


def _response(upstream: httpx.Response, *drop: str) -> web.StreamResponse:
    headers = CIMultiDict(end_to_end(upstream.headers, *drop))
    return web.StreamResponse(
        status=upstream.status_code, reason=upstream.reason_phrase or None, headers=headers
    )


async def _pass_through(request: web.Request, upstream: httpx.Response) -> web.StreamResponse:
    resp = _response(upstream)
    await resp.prepare(request)
    async for chunk in upstream.aiter_raw():
        await resp.write(chunk)
    await resp.write_eof()
    return resp


async def _relay_body(
    request: web.Request, upstream: httpx.Response, plan: AttemptPlan, ctx: RelayContext
) -> tuple[web.StreamResponse, str]:
    body = b"".join([c async for c in upstream.aiter_raw()])
    if plan.tokens_per_sec:
        # A non-streamed answer exists only once the whole reply is generated.
        await ctx.clock.sleep(output_tokens(body) / plan.tokens_per_sec)
    resp = _response(upstream)
    await resp.prepare(request)
    if plan.first_byte_delay_s:
        await ctx.clock.sleep(plan.first_byte_delay_s)
    if plan.stream_cut is not None:
        await resp.write(body[: len(body) // 2])
        reset_connection(request.transport)
        return resp, "stream_cut"
    await resp.write(body)
    await resp.write_eof()
    return resp, "ok"


def _source(upstream: httpx.Response) -> tuple[AsyncIterator[bytes], tuple[str, ...]]:
    # Events can only be found in decoded bytes: an encoded stream is decoded and sent
    # without its Content-Encoding (and length).
    if upstream.headers.get("content-encoding", "identity").lower() != "identity":
        return upstream.aiter_bytes(), ("content-encoding", "content-length")
    return upstream.aiter_raw(), ("content-length",)


async def _relay_events(
    request: web.Request,
    upstream: httpx.Response,
    plan: AttemptPlan,
    ctx: RelayContext,
    kind: str,
) -> tuple[web.StreamResponse, str]:
    source, drop = _source(upstream)
    resp = _response(upstream, *drop)
    await resp.prepare(request)
    if plan.first_byte_delay_s:
        await ctx.clock.sleep(plan.first_byte_delay_s)
    faults = _StreamFaults(request, resp, plan, ctx)
    splitter = EventSplitter(kind)
    async for chunk in source:
        for event in splitter.feed(chunk):
            terminal = is_terminal(event, kind)
            if await faults.before(terminal):
                return resp, faults.outcome
            if terminal and plan.no_done is not None:
                faults.withheld = True
                continue
            await resp.write(event)
    if splitter.buf:
        await resp.write(splitter.buf)
    if await faults.before(True):
        return resp, faults.outcome
    if plan.no_done is not None:
        faults.outcome = "no_done"
        await ctx.hold(plan.no_done.seconds)
    await resp.write_eof()
    return resp, faults.outcome


class _StreamFaults:
    """The stream faults of one plan, fired at upstream event offsets."""

    def __init__(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        plan: AttemptPlan,
        ctx: RelayContext,
    ) -> None:
        self.request, self.resp, self.plan, self.ctx = request, resp, plan, ctx
        self.index = 0  # upstream events relayed so far
        self.stalled = self.malformed = self.withheld = False
        self.outcome = "ok"
        self.paced_from = (ctx.clock.now(), 0)

    def _due(self, fault: Any, force: bool) -> bool:
        return fault is not None and (force or self.index >= fault.after_tokens)

    async def before(self, terminal: bool) -> bool:
        """Apply what is due before the next event; True when the stream is over."""
        plan, clock = self.plan, self.ctx.clock
        if self._due(plan.stream_cut, terminal):
            self.outcome = "stream_cut"
            # A close without the chunked terminator: the client sees an incomplete body.
            if self.request.transport is not None:
                self.request.transport.abort()
            return True
        if not self.stalled and self._due(plan.stream_stall, False):
            self.stalled = True
            await clock.sleep(plan.stream_stall.seconds or 0.0)  # type: ignore[union-attr]
            self.paced_from = (clock.now(), self.index)
        if not self.malformed and self._due(plan.malformed_chunk, terminal):
            self.malformed = True
            stub = SimpleNamespace(id="chaos-proxy", model=self.ctx.model)
            await self.resp.write(self.ctx.wire.malformed_event(stub))  # type: ignore[arg-type]
        if self._due(plan.stream_error_event, terminal):
            err = stream_error_from_fault(plan.stream_error_event)  # type: ignore[arg-type]
            await self.resp.write(self.ctx.wire.stream_error(err, self.ctx.model or None))
            await self.resp.write_eof()
            self.outcome = "stream_error_event"
            return True
        await self._pace()
        self.index += 1
        return False

    async def _pace(self) -> None:
        rate = self.plan.tokens_per_sec
        if not rate:
            return
        start, base = self.paced_from
        ahead = start + (self.index - base) / rate - self.ctx.clock.now()
        if ahead > 0:
            await self.ctx.clock.sleep(ahead)
