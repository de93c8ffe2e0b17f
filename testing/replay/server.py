"""Serving a cassette as a provider on loopback, with the recorded timing.

The server's timeline runs from the cassette's start (its mark, else the start of the
recording): a request arriving ``t`` seconds in is answered with the exchange recorded
for the same method and path (streaming or not, when both were recorded) that arrived
last at or before ``t`` (the first one before any), so a policy sees what the provider
was doing at that moment of the incident, whatever it asks and however often. The answer
keeps its timing: the status line ``headers_s`` after arrival, each body chunk at its
recorded offset, a dropped connection as a TCP reset, and an answer that never came as a
hold until the client leaves. A path the cassette never saw answers 501 (counted in
``unmatched``). Delays go through a :class:`~agent_failover.testing.sim.clock.Clock`, and
:meth:`RunningReplay.seek` moves the timeline, so a test can step through an incident
instead of waiting for it; on the time-skipping server, :class:`ReplayClockTransport`
stamps each request with the environment's (skipped) time, which then picks the exchange.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from aiohttp import web
from multidict import CIMultiDict

from agent_failover.testing.chaos_proxy.relay import HOP_BY_HOP
from agent_failover.testing.chaos_proxy.scenario import describe_request
from agent_failover.testing.fault_transport import activity_clock
from agent_failover.testing.replay.cassette import Cassette, Exchange, load_cassette
from agent_failover.testing.sim.clock import Clock, SystemClock
from agent_failover.testing.sim.handler import hold, reset_connection
from agent_failover.testing.sim.server import MAX_REQUEST_BYTES, SHUTDOWN_TIMEOUT_S

UNMATCHED_STATUS = 501
#: Seconds into the incident a request stands for, when the client says so (see
#: :class:`ReplayClockTransport`); without it the server's own timeline decides.
AT_HEADER = "x-replay-at"
_DROP = HOP_BY_HOP | {"content-length", "content-encoding", "date", "server"}


class ExchangeIndex:
    """The cassette's exchanges by (method, path, streaming), in arrival order."""

    def __init__(self, cassette: Cassette) -> None:
        self.start = cassette.start
        self._by: dict[tuple[str, str, bool], list[Exchange]] = defaultdict(list)
        for ex in cassette.exchanges:
            req = ex.request
            self._by[(req.method.upper(), req.path, req.stream)].append(ex)
        self._times = {k: [e.at - self.start for e in v] for k, v in self._by.items()}

    def pick(self, method: str, path: str, stream: bool, t: float) -> Exchange | None:
        """The exchange for this request ``t`` seconds into the incident (None: unseen)."""
        key = (method.upper(), path, stream)
        if key not in self._by:
            key = (method.upper(), path, not stream)
            if key not in self._by:
                return None
        i = bisect.bisect_right(self._times[key], t) - 1
        return self._by[key][max(0, i)]


@dataclass
class ReplayState:
    """What the handler and the test share: the index, the timeline, what was asked."""

    index: ExchangeIndex
    clock: Clock
    origin: float  # clock time of the timeline's t=0
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)
    arrivals: list[float] = field(default_factory=list)  # timeline seconds of each request
    served: Counter[str] = field(default_factory=Counter)  # by recorded status / end
    unmatched: int = 0

    def position(self) -> float:
        """Seconds into the incident."""
        return self.clock.now() - self.origin


class ReplayHandler:
    """Answers every request with its recorded exchange."""

    def __init__(self, state: ReplayState) -> None:
        self.state = state

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Pick the exchange for now, then play it back with its timing."""
        st = self.state
        arrived = st.clock.now()
        body = await request.read()
        t = _stated_time(request) if AT_HEADER in request.headers else st.position()
        st.arrivals.append(t)
        stream = describe_request(request.method, request.path, request.query, body).stream
        ex = st.index.pick(request.method, request.path, stream, t)
        if ex is None:
            st.unmatched += 1
            message = f"replay: no recorded exchange for {request.method} {request.path}"
            return web.json_response({"error": {"message": message}}, status=UNMATCHED_STATUS)
        rsp = ex.response
        st.served[str(rsp.status) if rsp.status else rsp.end] += 1
        if rsp.status is None:
            return await self._no_answer(request, ex, arrived)
        return await self._answer(request, ex, arrived)

    async def _until(self, arrived: float, offset: float) -> None:
        await self.state.clock.sleep(arrived + offset - self.state.clock.now())

    async def _no_answer(
        self, request: web.Request, ex: Exchange, arrived: float
    ) -> web.StreamResponse:
        if ex.response.end == "client_left":
            # Nothing came before the original client gave up: nothing comes now either.
            await hold(self.state.shutdown, self.state.clock, None)
        else:
            await self._until(arrived, ex.response.end_s)
        reset_connection(request.transport)
        return web.Response()

    async def _answer(
        self, request: web.Request, ex: Exchange, arrived: float
    ) -> web.StreamResponse:
        rsp = ex.response
        await self._until(arrived, rsp.headers_s or 0.0)
        headers = CIMultiDict((k, v) for k, v in rsp.headers if k.lower() not in _DROP)
        out = web.StreamResponse(status=rsp.status or 200, reason=rsp.reason, headers=headers)
        await out.prepare(request)
        for offset, data in rsp.chunk_bytes():
            await self._until(arrived, offset)
            await out.write(data)
        if rsp.end == "reset":
            await self._until(arrived, rsp.end_s)
            reset_connection(request.transport)
            return out
        if rsp.end == "client_left":
            await hold(self.state.shutdown, self.state.clock, None)
            reset_connection(request.transport)
            return out
        await out.write_eof()
        return out


def _stated_time(request: web.Request) -> float:
    try:
        return float(request.headers[AT_HEADER])
    except ValueError:
        raise web.HTTPBadRequest(text=f"{AT_HEADER} must be seconds") from None


class ReplayClockTransport(httpx.AsyncBaseTransport):
    """An httpx transport that tells the replay server when each request happens on the
    test environment's clock (:func:`~agent_failover.testing.activity_clock`: the
    time-skipping server's time inside an activity), so an incident plays on skipped
    time. Give it to the worker's HTTP client and :meth:`start` it at the incident's t=0::

        transport = ReplayClockTransport()
        transport.start((await env.get_current_time()).timestamp())
        http = build_http_client(policy.endpoints.values(), transport=transport)
    """

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport()
        self.clock = clock or activity_clock
        self.started_at: float | None = None

    def start(self, epoch_s: float) -> None:
        """Make ``epoch_s`` (on the clock) the incident's t=0."""
        self.started_at = epoch_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Stamp the request with its incident time, then send it."""
        if self.started_at is None:
            raise RuntimeError("ReplayClockTransport.start() was never called")
        request.headers[AT_HEADER] = f"{self.clock() - self.started_at:.3f}"
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self.inner.aclose()


@dataclass
class RunningReplay:
    """A replay server bound to a loopback port in the current event loop."""

    runner: web.AppRunner
    state: ReplayState
    cassette: Cassette
    host: str
    port: int

    @property
    def url(self) -> str:
        """``http://host:port``: what ``SIM_URL`` points at for a simulator-shaped policy."""
        return f"http://{self.host}:{self.port}"

    def seek(self, seconds: float) -> None:
        """Make now be ``seconds`` into the incident; forget the arrivals so far."""
        self.state.origin = self.state.clock.now() - seconds
        self.state.arrivals.clear()
        self.state.served.clear()
        self.state.unmatched = 0

    def position(self) -> float:
        """Seconds into the incident now."""
        return self.state.position()

    async def stop(self) -> None:
        """Release held requests and unbind."""
        self.state.shutdown.set()
        await self.runner.cleanup()

    async def __aenter__(self) -> RunningReplay:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def start_replay(
    cassette: Cassette | str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    clock: Clock | None = None,
    at: float = 0.0,
) -> RunningReplay:
    """Serve ``cassette`` (or the cassette folder at that path) on ``host:port``
    (``port=0``: a free one), its timeline ``at`` seconds in now; ``async with`` stops it."""
    tape = cassette if isinstance(cassette, Cassette) else load_cassette(cassette)
    clk = clock or SystemClock()
    state = ReplayState(index=ExchangeIndex(tape), clock=clk, origin=clk.now() - at)
    app = web.Application(client_max_size=MAX_REQUEST_BYTES)
    app.router.add_route("*", "/{tail:.*}", ReplayHandler(state).handle)
    runner = web.AppRunner(
        app, handler_cancellation=True, shutdown_timeout=SHUTDOWN_TIMEOUT_S, access_log=None
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return RunningReplay(runner, state, tape, host, runner.addresses[0][1])
