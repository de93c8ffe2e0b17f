"""Starting and stopping the simulator: in-process for tests, blocking for the CLI.

:func:`start_simulator` binds an aiohttp server on loopback inside the caller's event
loop and returns a :class:`RunningSimulator` (URL, port, SDK base URLs, the shared
state, ``stop()``), so a pytest fixture can run it next to the code under test. The
runner enables handler cancellation so a client that gives up releases its handler,
and a middleware makes sure every accepted socket has TCP_NODELAY so small SSE events
leave immediately. :func:`run_simulator_blocking` is what ``python -m sim`` and the
``failover sim`` command call.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.admin_api import STATE_KEY, add_admin_routes
from agent_failover.testing.sim.clock import Clock
from agent_failover.testing.sim.config import SimConfig, load_sim_config
from agent_failover.testing.sim.handler import CompletionHandler, ensure_nodelay
from agent_failover.testing.sim.oauth import add_oauth_routes
from agent_failover.testing.sim.scenario import load_scenario
from agent_failover.testing.sim.state import SimState
from agent_failover.testing.sim.tools import add_tool_routes

# Large prompts are how the context-window checks get exercised (1M-token Gemini window).
MAX_REQUEST_BYTES = 64 * 1024 * 1024
# Held requests are released by the shutdown event, so cleanup needs only a short grace.
SHUTDOWN_TIMEOUT_S = 2.0
NODELAY_FIXED_KEY: web.AppKey[list[int]] = web.AppKey("nodelay_fixed", list)


@web.middleware
async def _nodelay_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    # asyncio and aiohttp both set TCP_NODELAY today; checking per request keeps the
    # guarantee if either ever stops doing so.
    if ensure_nodelay(request.transport):
        request.app[NODELAY_FIXED_KEY][0] += 1
    return await handler(request)


def build_app(state: SimState) -> web.Application:
    """The aiohttp application: admin API, tool server, then every endpoint's routes."""
    app = web.Application(client_max_size=MAX_REQUEST_BYTES, middlewares=[_nodelay_middleware])
    app[STATE_KEY] = state
    app[NODELAY_FIXED_KEY] = [0]
    add_admin_routes(app)
    add_tool_routes(app, state.tools)
    add_oauth_routes(app, state.oauth)
    app.router.add_route("*", "/{endpoint}/{tail:.*}", CompletionHandler(state).handle)
    return app


@dataclass
class RunningSimulator:
    """A simulator bound to a port in the current event loop."""

    runner: web.AppRunner
    state: SimState
    host: str
    port: int

    @property
    def url(self) -> str:
        """``http://host:port`` of the server."""
        return f"http://{self.host}:{self.port}"

    @property
    def config(self) -> SimConfig:
        """The configuration it was started with."""
        return self.state.config

    def base_url(self, endpoint_name: str) -> str:
        """The SDK-convention base URL of an endpoint (OpenAI's includes ``/v1``)."""
        return self.state.config.endpoint(endpoint_name).base_url(self.url)

    def endpoint_config(self, endpoint_name: str, **overrides: object) -> EndpointConfig:
        """The shared :class:`EndpointConfig` describing one simulated endpoint."""
        return self.state.config.endpoint(endpoint_name).to_endpoint_config(self.url, **overrides)

    def admin(self, **client_kwargs: object) -> SimAdmin:
        """An admin client for this simulator (close it, or use ``async with``)."""
        return SimAdmin(self.url, **client_kwargs)  # type: ignore[arg-type]

    @property
    def nodelay_fixed(self) -> int:
        """How many requests arrived on a socket without TCP_NODELAY (then fixed)."""
        return self.runner.app[NODELAY_FIXED_KEY][0]

    async def stop(self) -> None:
        """Release held requests, close connections and unbind the port."""
        self.state.shutdown.set()
        await self.runner.cleanup()


async def start_simulator(
    config_path: str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    config: SimConfig | None = None,
    clock: Clock | None = None,
    scenario_path: str | Path | None = None,
) -> RunningSimulator:
    """Start the simulator in the running loop; ``port=0`` picks a free port."""
    cfg = config if config is not None else load_sim_config(config_path)
    state = SimState(cfg, clock=clock)
    if scenario_path is not None:
        state.load_scenario(load_scenario(scenario_path))
    runner = web.AppRunner(
        build_app(state),
        handler_cancellation=True,
        shutdown_timeout=SHUTDOWN_TIMEOUT_S,
        access_log=None,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_port = runner.addresses[0][1]
    return RunningSimulator(runner=runner, state=state, host=host, port=bound_port)


async def serve_forever(
    port: int,
    config_path: str | Path | None = None,
    scenario_path: str | Path | None = None,
    host: str = "127.0.0.1",
    announce: Callable[[str], None] = print,
) -> None:
    """Run until SIGINT/SIGTERM (or cancellation), announcing the endpoints' base URLs."""
    sim = await start_simulator(config_path, host=host, port=port, scenario_path=scenario_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    announce(f"provider simulator listening on {sim.url} (admin: {sim.url}/_admin/endpoints)")
    for ep in sim.config.endpoints:
        announce(f"  {ep.name:<20} {ep.kind.value:<10} {ep.region:<8} {sim.base_url(ep.name)}")
    if sim.state.scenario is not None:
        announce(f"  scenario {sim.state.scenario.scenario.name!r} loaded")
    try:
        await stop.wait()
    finally:
        await sim.stop()


def run_simulator_blocking(
    port: int,
    config_path: str | Path | None = None,
    scenario_path: str | Path | None = None,
    host: str = "127.0.0.1",
) -> None:
    """Serve on ``host:port`` until interrupted (the ``failover sim`` command).

    The default is loopback; a container (docker-compose) passes ``0.0.0.0``.
    """
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_forever(port, config_path, scenario_path, host=host))
