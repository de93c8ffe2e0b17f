"""Answering one completion attempt: parse, plan faults, wait, then reply or fail.

The handler is provider-neutral: the endpoint's :class:`~sim.wire.base.WireFormat`
parses the request and renders every byte, while this module decides *when* bytes go
out and *which* fault interrupts them. Order of an attempt: validation (unknown model,
prompt over the context window) answers at once; then the fault plan is drawn, the base
time-to-first-byte plus injected latency elapses, and a terminal fault (error status,
reset, hang) may end the attempt; otherwise the reply is sent, paced at the endpoint's
tokens per second, with stream faults (cut, stall, malformed chunk, error event, missing
terminal marker) applied at their token offsets. Every attempt is logged with its
faults and outcome, including ones the client abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from agent_failover.resilience.endpoint import ProviderKind
from agent_failover.testing.sim.clock import Clock
from agent_failover.testing.sim.config import SimEndpoint
from agent_failover.testing.sim.content import (
    ParsedRequest,
    Reply,
    build_reply,
    follow_prompted_schema,
)
from agent_failover.testing.sim.faults import AttemptPlan, Fault, FaultKind, plan_attempt
from agent_failover.testing.sim.golden import answers_correctly
from agent_failover.testing.sim.state import (
    SYSTEM_LOG_CHARS,
    AttemptLogEntry,
    AttemptOutcome,
    SimState,
)
from agent_failover.testing.sim.wire import (
    ErrorCategory,
    Operation,
    SimError,
    WireFormat,
    wire_for,
)
from agent_failover.testing.sim.wire.base import (
    context_error,
    error_from_fault,
    stream_error_from_fault,
)

_ID_PREFIX = {
    ProviderKind.ANTHROPIC: "msg_sim",
    ProviderKind.OPENAI: "chatcmpl-sim",
    ProviderKind.GEMINI: "sim",
    ProviderKind.BEDROCK: "bedrock-sim",
}
# Sleeping for less than this per token costs more in loop wake-ups than it buys in
# pacing accuracy; the pacer lets debt accumulate up to it.
_PACING_GRANULARITY_S = 0.002


def ensure_nodelay(transport: asyncio.BaseTransport | None) -> bool:
    """Make sure Nagle is off on the accepted socket; return whether it had to be set."""
    if transport is None:
        return False
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    if sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY):
        return False
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return True


def reset_connection(transport: asyncio.BaseTransport | None) -> None:
    """Drop the connection with a TCP RST (SO_LINGER 0), not a graceful FIN."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


#: Faults the client asks for on this one request (a JSON list of :class:`Fault`), added
#: after the endpoint's own: how :class:`agent_failover.testing.FaultTransport` plays a
#: timeline on the test's clock instead of the simulator's.
FAULTS_HEADER = "x-sim-faults"


def header_faults(headers: Mapping[str, str]) -> list[Fault]:
    """The request's ``x-sim-faults``; a malformed header is the client's error (400)."""
    raw = headers.get(FAULTS_HEADER)
    if not raw:
        return []
    try:
        return [Fault.model_validate(f) for f in json.loads(raw)]
    except (ValueError, TypeError) as exc:
        raise SimError(ErrorCategory.INVALID_REQUEST, f"{FAULTS_HEADER}: {exc}") from None


async def hold(shutdown: asyncio.Event, clock: Clock, seconds: float | None) -> bool:
    """Wait ``seconds`` on ``clock`` (forever if None) or until ``shutdown``; True if
    shutdown ended it (a held request of the simulator or the chaos proxy)."""
    waiters = [asyncio.ensure_future(shutdown.wait())]
    if seconds is not None:
        waiters.append(asyncio.ensure_future(clock.sleep(seconds)))
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        # Cancelled or not, never leave a waiter behind.
        for w in waiters:
            w.cancel()
    return shutdown.is_set()


class _Pacer:
    """Releases token ``i`` no earlier than ``start + i / tokens_per_sec``."""

    def __init__(self, state: SimState, tokens_per_sec: float) -> None:
        self._clock = state.clock
        self._interval = 1.0 / tokens_per_sec
        self.restart(0)

    def restart(self, index: int) -> None:
        """Pace from now on as if token ``index`` were the first (after a stall)."""
        self._start = self._clock.now()
        self._base = index

    async def before(self, index: int) -> None:
        """Wait until token ``index`` is due."""
        ahead = self._start + (index - self._base) * self._interval - self._clock.now()
        if ahead >= _PACING_GRANULARITY_S:
            await self._clock.sleep(ahead)


class CompletionHandler:
    """The aiohttp handler for every ``/<endpoint>/...`` path."""

    def __init__(self, state: SimState) -> None:
        self.state = state

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Dispatch to the endpoint's wire format and answer the request."""
        name = request.match_info["endpoint"]
        tail = request.match_info["tail"]
        endpoint = self.state.endpoints.get(name)
        if endpoint is None:
            return web.json_response(
                {"error": f"unknown endpoint {name!r}", "known": list(self.state.endpoints)},
                status=404,
            )
        wire = wire_for(endpoint)
        query = dict(request.query)
        op = wire.route(request.method, tail, query)
        if op is None:
            err = SimError(ErrorCategory.NOT_FOUND, f"No route for {request.method} /{tail}")
            return self._error_response(wire, err, None, "")
        wire = wire.for_operation(op)
        refused = wire.auth_error(request.headers, query, endpoint, self.state.config.require_auth)
        if refused is not None:
            return self._error_response(wire, refused, None, "")
        if op.name == "models":
            return web.json_response(wire.models(endpoint))
        return await self._attempt(request, endpoint, wire, op)

    def _error_response(
        self, wire: WireFormat, err: SimError, model: str | None, request_id: str
    ) -> web.Response:
        status = wire.status_for(err)
        err.now = self.state.clock.now()
        headers = wire.error_headers(err)
        if request_id:
            headers[wire.request_id_header()] = request_id
        return web.json_response(
            wire.error_body(err, status, model), status=status, headers=headers
        )

    async def _attempt(
        self, request: web.Request, endpoint: SimEndpoint, wire: WireFormat, op: Operation
    ) -> web.StreamResponse:
        entry = self.state.begin_attempt(endpoint.name)
        entry.request_id = f"req_sim_{entry.seq:08d}"
        try:
            return await self._run(request, endpoint, wire, op, entry)
        except SimError as err:
            entry.outcome = AttemptOutcome.ERROR
            entry.status = wire.status_for(err)
            return self._error_response(wire, err, entry.model, entry.request_id)
        except ConnectionError:
            # The client closed the socket while we were writing; aiohttp ignores
            # the response we return because the transport is gone.
            entry.outcome = AttemptOutcome.CLIENT_DISCONNECTED
            return web.Response()
        except asyncio.CancelledError:
            # Catch BaseException-derived cancellation: aiohttp cancels the handler when
            # the client disconnects, and the log must still say how the attempt ended.
            if entry.outcome is AttemptOutcome.PENDING:
                entry.outcome = (
                    AttemptOutcome.SERVER_SHUTDOWN
                    if self.state.shutdown.is_set()
                    else AttemptOutcome.CLIENT_DISCONNECTED
                )
            raise
        finally:
            self.state.end_attempt(entry)

    async def _parse(
        self, request: web.Request, endpoint: SimEndpoint, wire: WireFormat, op: Operation
    ) -> ParsedRequest:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            raise SimError(
                ErrorCategory.INVALID_REQUEST, "The request body is not valid JSON."
            ) from None
        parsed = wire.parse(body, op, endpoint)
        if op.path_stream and not op.sse:
            # Gemini without alt=sse returns the whole stream as one JSON array.
            parsed.stream = False
        return parsed

    async def _run(
        self,
        request: web.Request,
        endpoint: SimEndpoint,
        wire: WireFormat,
        op: Operation,
        entry: AttemptLogEntry,
    ) -> web.StreamResponse:
        state = self.state
        arrival_load = state.inflight_on(endpoint.name)
        parsed = await self._admit(request, endpoint, wire, op, entry)
        plan = plan_attempt(
            [*state.active_faults(endpoint.name), *header_faults(request.headers)],
            model=parsed.model,
            stream=parsed.stream,
            json_mode=parsed.json_mode,
            rng=state.rng,
        )
        entry.faults = plan.labels
        await state.clock.sleep(endpoint.latency.sample_s(state.rng) + plan.latency_s)
        if plan.terminal is not None:
            return await self._terminate(request, endpoint, parsed, plan.terminal, entry)
        reply = build_reply(
            parsed,
            plan=plan,
            reply_id=f"{_ID_PREFIX[endpoint.kind]}_{parsed.seed() & 0xFFFFFFFF:08x}{entry.seq:06d}",
            created=int(state.clock.now()),
            max_output_tokens=endpoint.max_output_tokens,
            correct=self._correct(endpoint.name, parsed, arrival_load),
        )
        tps = plan.tokens_per_sec or endpoint.tokens_per_sec
        if parsed.stream:
            return await self._stream(request, wire, reply, parsed, plan, entry, tps)
        return await self._respond(request, wire, op, reply, plan, entry, tps)

    async def _admit(
        self,
        request: web.Request,
        endpoint: SimEndpoint,
        wire: WireFormat,
        op: Operation,
        entry: AttemptLogEntry,
    ) -> ParsedRequest:
        """Parse and log the request; an unknown model or a prompt over the context window
        is refused at once, before any fault or latency."""
        parsed = await self._parse(request, endpoint, wire, op)
        entry.model, entry.stream = parsed.model, parsed.stream
        entry.input_tokens = parsed.prompt_tokens
        entry.system = parsed.system[:SYSTEM_LOG_CHARS]
        entry.native_schema = parsed.schema is not None or parsed.tool is not None
        parsed = follow_prompted_schema(parsed)
        if parsed.model not in endpoint.models:
            raise SimError(ErrorCategory.NOT_FOUND, f"model: {parsed.model}")
        if parsed.prompt_tokens > endpoint.context_window:
            entry.faults = ["context_length_auto"]
            raise context_error(parsed.prompt_tokens, endpoint.context_window)
        return parsed

    async def _terminate(
        self,
        request: web.Request,
        endpoint: SimEndpoint,
        parsed: ParsedRequest,
        terminal: Fault,
        entry: AttemptLogEntry,
    ) -> web.Response:
        """End the attempt with its terminal fault: a reset, a hang, or an error reply."""
        if terminal.kind is FaultKind.CONNECTION_RESET:
            entry.outcome = AttemptOutcome.RESET
            reset_connection(request.transport)
            return web.Response()
        if terminal.kind is FaultKind.HANG:
            released_by_shutdown = await self._hold(terminal.seconds)
            entry.outcome = (
                AttemptOutcome.SERVER_SHUTDOWN if released_by_shutdown else AttemptOutcome.RESET
            )
            reset_connection(request.transport)
            return web.Response()
        if terminal.kind is FaultKind.CONTEXT_LENGTH:
            raise context_error(
                max(parsed.prompt_tokens, endpoint.context_window + 1), endpoint.context_window
            )
        raise error_from_fault(terminal)

    def _correct(self, endpoint: str, parsed: ParsedRequest, arrival_load: int) -> bool:
        """Whether this endpoint gets a golden task right (busiest load seen counts)."""
        load = max(arrival_load, self.state.inflight_on(endpoint))
        accuracy = self.state.accuracy[endpoint].effective(load)
        return answers_correctly(
            self.state.config.seed, endpoint, parsed.system, parsed.last_user_text, accuracy
        )

    async def _hold(self, seconds: float | None) -> bool:
        return await hold(self.state.shutdown, self.state.clock, seconds)

    def _headers(self, wire: WireFormat, entry: AttemptLogEntry, content_type: str) -> dict:
        return {"content-type": content_type, wire.request_id_header(): entry.request_id}

    async def _respond(
        self,
        request: web.Request,
        wire: WireFormat,
        op: Operation,
        reply: Reply,
        plan: AttemptPlan,
        entry: AttemptLogEntry,
        tps: float,
    ) -> web.StreamResponse:
        payload: Any = wire.response(reply)
        if op.path_stream:
            payload = [payload]
        body = json.dumps(payload).encode()
        # A non-streaming answer exists only once the whole reply is generated.
        await self.state.clock.sleep(reply.output_tokens / tps)
        resp = web.StreamResponse(
            status=200, headers=self._headers(wire, entry, "application/json")
        )
        resp.content_length = len(body)
        await resp.prepare(request)
        if plan.first_byte_delay_s:
            await self.state.clock.sleep(plan.first_byte_delay_s)
        entry.status = 200
        if plan.stream_cut is not None:
            await resp.write(body[: len(body) // 2])
            entry.outcome = AttemptOutcome.STREAM_CUT
            reset_connection(request.transport)
            return resp
        await resp.write(body)
        await resp.write_eof()
        entry.tokens_sent = reply.output_tokens
        entry.outcome = AttemptOutcome.OK
        return resp

    async def _stream(
        self,
        request: web.Request,
        wire: WireFormat,
        reply: Reply,
        parsed: ParsedRequest,
        plan: AttemptPlan,
        entry: AttemptLogEntry,
        tps: float,
    ) -> web.StreamResponse:
        headers = self._headers(wire, entry, wire.stream_content_type)
        headers["cache-control"] = "no-cache"
        resp = web.StreamResponse(status=200, headers=headers)
        await resp.prepare(request)
        entry.status = 200
        if plan.first_byte_delay_s:
            await self.state.clock.sleep(plan.first_byte_delay_s)
        for event in wire.stream_prelude(reply):
            await resp.write(event)
        if await self._stream_pieces(request, resp, wire, reply, plan, entry, tps):
            return resp
        for event in wire.stream_finale(reply, parsed.include_usage):
            await resp.write(event)
        if plan.no_done is not None:
            entry.outcome = AttemptOutcome.NO_DONE
            if await self._hold(plan.no_done.seconds):
                entry.outcome = AttemptOutcome.SERVER_SHUTDOWN
            await resp.write_eof()
            return resp
        for event in wire.stream_trailer(reply):
            await resp.write(event)
        await resp.write_eof()
        entry.outcome = AttemptOutcome.OK
        return resp

    async def _stream_pieces(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        wire: WireFormat,
        reply: Reply,
        plan: AttemptPlan,
        entry: AttemptLogEntry,
        tps: float,
    ) -> bool:
        """Send the reply's pieces, paced, with the plan's stream faults at their token
        offsets; True if a fault ended the attempt (a cut or an error event)."""
        n = len(reply.pieces)

        def at(fault: Any) -> int | None:
            return None if fault is None else min(fault.after_tokens, n)

        cut_at, stall_at = at(plan.stream_cut), at(plan.stream_stall)
        bad_at, err_at = at(plan.malformed_chunk), at(plan.stream_error_event)
        pacer = _Pacer(self.state, tps / reply.tokens_per_piece)
        for i in range(n + 1):
            if i == cut_at:
                entry.outcome = AttemptOutcome.STREAM_CUT
                # A plain close (FIN) without the chunked terminator: the client sees
                # an incomplete body, like a proxy dropping an upstream connection.
                if request.transport is not None:
                    request.transport.abort()
                return True
            if i == stall_at and plan.stream_stall is not None:
                await self.state.clock.sleep(plan.stream_stall.seconds or 0.0)
                pacer.restart(i)
            if i == bad_at:
                await resp.write(wire.malformed_event(reply))
            if i == err_at and plan.stream_error_event is not None:
                await resp.write(
                    wire.stream_error(stream_error_from_fault(plan.stream_error_event), reply.model)
                )
                await resp.write_eof()
                entry.outcome = AttemptOutcome.STREAM_ERROR_EVENT
                return True
            if i == n:
                break
            await pacer.before(i)
            await resp.write(wire.stream_piece(reply, i, i + 1))
            entry.tokens_sent = min((i + 1) * reply.tokens_per_piece, reply.output_tokens)
        return False
