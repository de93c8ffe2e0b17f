"""The chaos proxy server: the simulator's fault engine in front of a real endpoint.

Every request (any method, any path) is described (provider, model, streaming), the
timeline's active faults for it are folded into one plan by the simulator's own
:func:`~agent_failover.testing.sim.faults.plan_attempt`, and then:

* latency faults delay the request before it is forwarded;
* a terminal fault answers in the upstream's place (the request is *not* forwarded):
  the provider's own error status, body and Retry-After as the simulator renders them,
  a TCP reset, or a hang until ``seconds`` pass, the client leaves or the proxy stops;
* an output fault (content the simulator writes: invalid JSON, schema violation, empty,
  oversized, refusal) also answers in the upstream's place, see :mod:`.substitute`;
* otherwise the request goes upstream byte for byte (headers untouched but the
  hop-by-hop ones and ``Host``) and the answer comes back through :func:`relay`.

``/_chaos/status`` (GET) shows the timeline's phase, the active events and the counts;
``/_chaos/restart`` (POST, optional ``?at=SECONDS``) restarts the timeline. Requests to
``/_chaos/*`` are never forwarded. Nothing logged ever holds a header value or a
credential-bearing query parameter (see :func:`redact_target`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from aiohttp import web

from agent_failover.testing.chaos_proxy.relay import RelayContext, end_to_end, relay
from agent_failover.testing.chaos_proxy.scenario import (
    CONTENT_KINDS,
    PROXY_WIRES,
    ProxyIdentity,
    ProxyScenario,
    RequestInfo,
    Timeline,
    describe_request,
    redact_headers,
    redact_target,
)
from agent_failover.testing.chaos_proxy.substitute import (
    answer_with_faulty_reply,
    parse_for_simulator,
)
from agent_failover.testing.sim.clock import Clock, SystemClock
from agent_failover.testing.sim.content import ParsedRequest
from agent_failover.testing.sim.faults import AttemptPlan, Fault, FaultKind, plan_attempt
from agent_failover.testing.sim.handler import hold, reset_connection
from agent_failover.testing.sim.server import MAX_REQUEST_BYTES, SHUTDOWN_TIMEOUT_S
from agent_failover.testing.sim.wire.base import context_error, error_from_fault

log = logging.getLogger("agent_failover.chaos_proxy")
ADMIN_PREFIX = "/_chaos/"
#: Outcomes that end the connection before any status line reached the client.
_NO_STATUS = frozenset({"reset", "server_shutdown", "client_disconnected"})
#: Without a ``--provider`` or a recognisable path, errors are rendered OpenAI-style.
FALLBACK_WIRE = PROXY_WIRES["openai"]


@dataclass
class ProxyStats:
    """Counts since start (or the last timeline restart)."""

    requests: int = 0
    passed: int = 0  # forwarded with no fault planned
    inflight: int = 0
    upstream_errors: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return {
            "requests": self.requests,
            "passed_through": self.passed,
            "inflight": self.inflight,
            "upstream_errors": self.upstream_errors,
            "faults": dict(self.faults),
            "outcomes": dict(self.outcomes),
            "statuses": dict(self.statuses),
        }


@dataclass
class ChaosProxyState:
    """Everything the handler and the admin routes share."""

    upstream: str
    timeline: Timeline
    http: httpx.AsyncClient
    provider: str | None = None
    clock: Clock = field(default_factory=SystemClock)
    rng: random.Random = field(default_factory=lambda: random.Random(1234))
    stats: ProxyStats = field(default_factory=ProxyStats)
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)
    #: A :class:`agent_failover.testing.replay.record.Recorder` (``--record``), or None.
    recorder: Any = None

    def upstream_url(self, raw_path: str) -> str:
        """The upstream URL for ``raw_path`` (path and query exactly as received)."""
        return self.upstream.rstrip("/") + raw_path

    def status(self) -> dict[str, Any]:
        """The admin view: timeline and counts."""
        return {
            "upstream": safe_origin(self.upstream),
            **self.timeline.status(self.clock.now()),
            "counts": self.stats.as_dict(),
        }


def safe_origin(url: str) -> str:
    """``scheme://host[:port]/path`` of a URL: no userinfo, no query (they may hold keys)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class ChaosProxyHandler:
    """The aiohttp handler for every path but ``/_chaos/*``."""

    def __init__(self, state: ChaosProxyState) -> None:
        self.state = state

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Plan the faults for this request, then inject them or forward it."""
        st = self.state
        started = time.monotonic()
        body = await request.read()
        info = describe_request(
            request.method, request.path, request.query, body, provider=st.provider
        )
        faults = st.timeline.faults_for(info, st.clock.now())
        parsed = None
        if any(f.kind in CONTENT_KINDS for f in faults):
            parsed = parse_for_simulator(info, body)
        json_mode = parsed is not None and parsed.json_mode
        plan = plan_attempt(
            faults, model=info.model, stream=info.stream, json_mode=json_mode, rng=st.rng
        )
        st.stats.requests += 1
        st.stats.inflight += 1
        st.stats.faults.update(plan.labels)
        outcome, status = "client_disconnected", "-"
        rec = None
        if st.recorder is not None:
            headers = request.headers.items()
            rec = st.recorder.start(
                request.method, request.path, request.query_string, headers, info, len(body)
            )
        try:
            resp, outcome = await self._answer(request, body, info, plan, parsed, rec)
            status = "-" if outcome in _NO_STATUS else str(resp.status)
            if rec is not None:
                _note_injected(rec, resp, outcome)
            return resp
        finally:
            if rec is not None:
                rec.finish(client_left=outcome == "client_disconnected")
            st.stats.inflight -= 1
            st.stats.outcomes[outcome] += 1
            st.stats.statuses[status] += 1
            if not plan.labels:
                st.stats.passed += 1
            log.info(
                "%s %s -> %s %s [%s] %.0f ms",
                request.method,
                redact_target(request.path, request.query_string),
                status,
                outcome,
                ",".join(plan.labels) or "pass",
                (time.monotonic() - started) * 1000,
            )

    async def _answer(
        self,
        request: web.Request,
        body: bytes,
        info: RequestInfo,
        plan: AttemptPlan,
        parsed: ParsedRequest | None,
        rec: Any = None,
    ) -> tuple[web.StreamResponse, str]:
        st = self.state
        if plan.latency_s:
            await st.clock.sleep(plan.latency_s)
        if plan.terminal is not None:
            return await self._terminal(request, info, plan.terminal)
        if parsed is not None and (plan.output is not None or plan.refusal is not None):
            return await answer_with_faulty_reply(request, info, parsed, plan, st.clock)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("forwarding headers %s", redact_headers(request.headers.items()))
        upstream_req = httpx.Request(
            request.method,
            st.upstream_url(request.raw_path),
            headers=_forwarded_headers(request, recording=rec is not None),
            content=body,
        )
        try:
            upstream = await st.http.send(upstream_req, stream=True)
        except httpx.HTTPError as exc:
            st.stats.upstream_errors += 1
            if rec is not None:
                rec.fail("reset", type(exc).__name__)
            return _bad_gateway(st.upstream, exc), "upstream_error"
        if rec is not None:
            rec.tee(upstream)
        try:
            ctx = RelayContext(st.clock, info.wire or FALLBACK_WIRE, info.model, self._hold)
            return await relay(request, upstream, plan, ctx)
        except ConnectionError:
            # The client left mid-answer; the transport is gone, nothing more to send.
            return web.Response(), "client_disconnected"
        except httpx.HTTPError as exc:
            # The upstream broke mid-answer: drop the client too, as the upstream did.
            st.stats.upstream_errors += 1
            log.warning("upstream failed mid-answer: %s", type(exc).__name__)
            if rec is not None:
                rec.fail("reset", type(exc).__name__)
            reset_connection(request.transport)
            return web.Response(status=502), "upstream_error"
        finally:
            await upstream.aclose()

    async def _terminal(
        self, request: web.Request, info: RequestInfo, fault: Fault
    ) -> tuple[web.StreamResponse, str]:
        if fault.kind is FaultKind.CONNECTION_RESET:
            reset_connection(request.transport)
            return web.Response(), "reset"
        if fault.kind is FaultKind.HANG:
            released = await self._hold(fault.seconds)
            reset_connection(request.transport)
            return web.Response(), "server_shutdown" if released else "reset"
        wire = info.wire or FALLBACK_WIRE
        if fault.kind is FaultKind.CONTEXT_LENGTH:
            err = context_error(1_000_001, 1_000_000)
        else:
            err = error_from_fault(fault)
        status = wire.status_for(err)
        body = wire.error_body(err, status, info.model or None)
        return web.json_response(body, status=status, headers=wire.error_headers(err)), "error"

    async def _hold(self, seconds: float | None) -> bool:
        return await hold(self.state.shutdown, self.state.clock, seconds)


def _forwarded_headers(request: web.Request, *, recording: bool) -> list[tuple[str, str]]:
    """The client's end-to-end headers; a recording asks for an unencoded body (it is
    redacted, which needs it readable)."""
    headers = end_to_end(request.headers, "host", "content-length", "expect")
    if recording:
        headers = [(k, v) for k, v in headers if k.lower() != "accept-encoding"]
        headers.append(("accept-encoding", "identity"))
    return headers


def _note_injected(rec: Any, resp: web.StreamResponse, outcome: str) -> None:
    """Record what the proxy answered itself (a fault of the scenario) as the client saw it."""
    if outcome in ("reset", "server_shutdown"):
        rec.fail("reset", "injected by the chaos proxy")
    elif rec.status is None and rec.end is None and isinstance(resp, web.Response):
        rec.answered(resp.status, resp.reason, list(resp.headers.items()), resp.body or b"")


def _bad_gateway(upstream: str, exc: httpx.HTTPError) -> web.Response:
    message = f"chaos proxy: upstream {safe_origin(upstream)} failed: {type(exc).__name__}"
    return web.json_response({"error": {"type": "bad_gateway", "message": message}}, status=502)


STATE_KEY: web.AppKey[ChaosProxyState] = web.AppKey("chaos_proxy_state", ChaosProxyState)


async def _admin_status(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATE_KEY].status())


async def _admin_restart(request: web.Request) -> web.Response:
    st = request.app[STATE_KEY]
    try:
        offset = float(request.query.get("at", "0"))
    except ValueError:
        return web.json_response({"error": "'at' must be seconds, e.g. ?at=30"}, status=400)
    st.timeline.restart(st.clock.now(), offset)
    st.stats = ProxyStats(inflight=st.stats.inflight)
    log.warning("timeline %r restarted at t=%.1fs", st.timeline.scenario.name, offset)
    return web.json_response(st.status())


def build_proxy_app(state: ChaosProxyState) -> web.Application:
    """The admin routes, then a catch-all route to the handler."""
    app = web.Application(client_max_size=MAX_REQUEST_BYTES)
    app[STATE_KEY] = state
    app.router.add_get(ADMIN_PREFIX + "status", _admin_status)
    app.router.add_post(ADMIN_PREFIX + "restart", _admin_restart)
    app.router.add_route("*", "/{tail:.*}", ChaosProxyHandler(state).handle)
    return app


@dataclass
class RunningChaosProxy:
    """A chaos proxy bound to a port in the current event loop."""

    runner: web.AppRunner
    state: ChaosProxyState
    host: str
    port: int
    owns_http: bool = True

    @property
    def url(self) -> str:
        """``http://host:port`` of the proxy."""
        return f"http://{self.host}:{self.port}"

    async def stop(self) -> None:
        """Release held requests, close connections, unbind, close the upstream client."""
        self.state.shutdown.set()
        await self.runner.cleanup()
        if self.owns_http:
            await self.state.http.aclose()


def upstream_client(
    connect_s: float = 10.0, read_s: float | None = None, **kwargs: Any
) -> httpx.AsyncClient:
    """The upstream client: no redirects followed, no read deadline (the caller has one)."""
    timeout = httpx.Timeout(connect=connect_s, read=read_s, write=connect_s, pool=connect_s)
    limits = httpx.Limits(max_connections=512, max_keepalive_connections=64)
    return httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=False, **kwargs)


async def start_chaos_proxy(
    upstream: str,
    scenario: ProxyScenario,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    identity: ProxyIdentity | None = None,
    provider: str | None = None,
    clock: Clock | None = None,
    seed: int = 1234,
    start_at: float | None = None,
    http: httpx.AsyncClient | None = None,
    recorder: Any = None,
) -> RunningChaosProxy:
    """Start the proxy in the running loop (``port=0``: a free port); t=0 is now or
    ``start_at`` (epoch seconds on ``clock``)."""
    clk = clock or SystemClock()
    timeline = Timeline(scenario, identity or ProxyIdentity(), start_at or clk.now())
    state = ChaosProxyState(
        upstream=upstream,
        timeline=timeline,
        http=http or upstream_client(),
        provider=provider,
        clock=clk,
        rng=random.Random(seed),
        recorder=recorder,
    )
    runner = web.AppRunner(
        build_proxy_app(state),
        handler_cancellation=True,
        shutdown_timeout=SHUTDOWN_TIMEOUT_S,
        access_log=None,
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1]
    return RunningChaosProxy(runner, state, host, bound, owns_http=http is None)


def describe_startup(proxy: RunningChaosProxy) -> list[str]:
    """The lines ``failover chaos-proxy`` prints when it is listening."""
    st = proxy.state
    tl = st.timeline
    ident = tl.identity
    lines = [
        f"chaos proxy listening on {proxy.url} -> {safe_origin(st.upstream)}",
        f"  scenario {tl.scenario.name!r}: {len(tl.scenario.events)} event(s), "
        f"t=0 at {time.strftime('%H:%M:%S', time.localtime(tl.started_at))}",
        f"  status: GET {proxy.url}{ADMIN_PREFIX}status · restart: POST "
        f"{proxy.url}{ADMIN_PREFIX}restart?at=SECONDS",
    ]
    for i, ev in enumerate(tl.scenario.events):
        until = "end" if ev.end_s is None else f"{ev.end_s:g}s"
        labels = ",".join(f.label for f in ev.faults)
        lines.append(f"  [{i}] {ev.start_s:g}s..{until} {labels} {ev.note}".rstrip())
        if ev.endpoints and ident.endpoint not in ev.endpoints:
            lines.append(
                f"      selects endpoint(s) {ev.endpoints}: fires only on paths starting "
                f"with /<name>/ (this proxy is --endpoint {ident.endpoint or '(unset)'})"
            )
    return lines


async def serve_chaos_proxy(
    upstream: str,
    scenario: ProxyScenario,
    *,
    announce: Callable[[str], None] = print,
    **kwargs: Any,
) -> None:
    """Run until SIGINT/SIGTERM (or cancellation), then stop gracefully."""
    proxy = await start_chaos_proxy(upstream, scenario, **kwargs)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    for line in describe_startup(proxy):
        announce(line)
    try:
        await stop.wait()
    finally:
        announce("chaos proxy stopping: releasing held requests")
        await proxy.stop()
