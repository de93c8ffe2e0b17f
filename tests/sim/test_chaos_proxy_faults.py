"""Every fault the chaos proxy injects looks to our adapters as it does from the simulator.

For each fault of the adapter test table (``tests/providers/test_registry_against_simulator.py``),
on four wire formats (Anthropic, OpenAI, Gemini, and Bedrock's
binary event stream), the same adapter call is made twice: once with the simulator
injecting the fault directly, once through the proxy (simulator as a healthy upstream)
with the fault on the proxy's timeline. Both outcomes must be the same: the same typed
error with the same decision, retryability and Retry-After, or a good reply both times.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from agent_failover.providers.client import build_http_client
from agent_failover.providers.registry import complete
from agent_failover.providers.validate import validate_reply
from agent_failover.resilience import errors as E
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.models import ChatReply
from agent_failover.testing.chaos_proxy import (
    ProxyIdentity,
    ProxyScenario,
    RunningChaosProxy,
    start_chaos_proxy,
)
from agent_failover.testing.chaos_proxy.scenario import Timeline
from agent_failover.testing.sim.faults import Fault, FaultKind
from agent_failover.testing.sim.server import RunningSimulator
from tests.providers.test_registry_against_simulator import CASES, STREAM, request_for

ENDPOINTS = ["anthropic-us-east", "openai-us", "gemini-flash", "bedrock-us-west-2"]
SUPPORTED = CASES
PARAMS = [
    pytest.param(ep, name, stream, id=f"{ep}-{name}-{'stream' if stream else 'json'}")
    for name, case in SUPPORTED.items()
    for stream in case.modes
    for ep in ENDPOINTS
]
_NONE = ProxyScenario.model_validate({"events": [{"from": 1e9, "path": "/x", "answers": 500}]})


def test_the_proxy_covers_every_fault_kind() -> None:
    covered = {FaultKind(c.fault["kind"]) for c in SUPPORTED.values()}
    assert covered == set(FaultKind)


@pytest.fixture(scope="module")
async def proxy(_sim_server: RunningSimulator) -> AsyncIterator[RunningChaosProxy]:
    running = await start_chaos_proxy(_sim_server.url, _NONE)
    yield running
    await running.stop()


def configs(sim: RunningSimulator, base: str) -> list[EndpointConfig]:
    return [sim.state.config.endpoint(e).to_endpoint_config(base) for e in ENDPOINTS]


@pytest.fixture(scope="module")
async def clients(
    _sim_server: RunningSimulator, proxy: RunningChaosProxy
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    async with (
        build_http_client(configs(_sim_server, _sim_server.url)) as direct,
        build_http_client(configs(_sim_server, proxy.url)) as proxied,
    ):
        yield direct, proxied


async def outcome(
    client: httpx.AsyncClient, ep: EndpointConfig, name: str, stream: bool
) -> ChatReply | E.ProviderError:
    case = SUPPORTED[name]
    request = request_for(case, stream)
    budgets = case.budgets
    if case.error is None:
        # A call that must succeed gets slack on a loaded machine (one more hop here).
        budgets = budgets.model_copy(update={"ttft_s": 1.5, "idle_s": 1.0, "total_s": 6.0})
    try:
        reply = await complete(client, ep, request, budgets)
        validate_reply(reply, request.json_schema, endpoint=ep.name)
        return reply
    except E.ProviderError as err:
        return err


def shape(out: ChatReply | E.ProviderError) -> tuple:
    if isinstance(out, ChatReply):
        return (ChatReply, bool(out.text))
    return (type(out), out.decision, out.retryable, out.retry_after)


@pytest.mark.parametrize(("endpoint", "name", "stream"), PARAMS)
async def test_fault_through_proxy_matches_direct(
    sim, proxy, clients, endpoint, name, stream
) -> None:
    case = SUPPORTED[name]
    direct_client, proxy_client = clients
    sim.state.set_faults(endpoint, [Fault.model_validate(case.fault)])
    direct = await outcome(direct_client, sim.endpoint_config(endpoint), name, stream)
    sim.state.clear_faults()
    await sim.state.wait_idle()
    sim.state.clear_attempts()

    sc = ProxyScenario.model_validate(
        {"events": [{"from": 0, "endpoint": endpoint, "faults": [case.fault]}]}
    )
    proxy.state.timeline = Timeline(sc, ProxyIdentity(), proxy.state.clock.now())
    ep = sim.state.config.endpoint(endpoint).to_endpoint_config(proxy.url)
    through = await outcome(proxy_client, ep, name, stream)
    proxy.state.timeline = Timeline(_NONE, ProxyIdentity(), proxy.state.clock.now())

    assert shape(through) == shape(direct), (direct, through)
    if case.error is not None:
        assert type(through) is case.error
    if name == "malformed_chunk" and stream is STREAM:
        assert isinstance(through, ChatReply) and through.malformed_events_skipped == 1
    if name in ("server_error", "rate_limit_retry_after", "connection_reset", "empty_output"):
        # Terminal and output faults answer in the upstream's place: nothing was forwarded.
        assert not [a for a in sim.state.attempts if a.endpoint == endpoint]
