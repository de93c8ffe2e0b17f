"""A probe never joins a user's call (issue 22 §1.7): while a call to a silent route is in
flight, the monitor's probe of that route is not sent (attempts on the primary: one), and
once the call has ended the route is probed again as usual."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from agent_failover.activities.health_models import ProbeInput
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import CallModelInput, HeldLease, RoleContextInput
from agent_failover.activities.probes import PROBE_PROMPT
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore
from tests.providers.wire import ANTHROPIC, OPENAI, Wire

ROUTE = "openai-us"
NOW = 1000.0


@pytest.fixture(scope="module")
def demo_policy() -> PolicyConfig:
    """The demo policy (its base URLs never reached: a mock transport answers)."""
    return load_policy(DEFAULT_POLICY_PATH, env={})


class SilentRoute:
    """A provider that holds user calls until :attr:`speak` is set and answers probes at
    once; counts every request it receives (the attempts on the route)."""

    def __init__(self, wire: Wire = OPENAI) -> None:
        self.wire = wire
        self.requests: list[str] = []
        self.speak = asyncio.Event()
        self.reached = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = request.content.decode()
        self.requests.append("probe" if PROBE_PROMPT in body else "user")
        self.reached.set()
        if PROBE_PROMPT not in body:
            await self.speak.wait()
        blocks = self.wire.ok_stream(["pong"])

        async def body() -> AsyncIterator[bytes]:
            for b in blocks:
                yield b

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def _acts(policy: PolicyConfig, route: SilentRoute) -> LLMActivitySet:
    http = httpx.AsyncClient(transport=httpx.MockTransport(route))
    return LLMActivitySet(
        policy, http, MemoryHealthStore(), MemoryResponseCache(), task_queue_for=lambda r: "q"
    )


def _call(
    route: str = ROUTE, lease: HeldLease | None = None, timeout_ms: float = 60_000
) -> CallModelInput:
    return CallModelInput(
        role="analyst",
        route=route,
        lease=lease,
        request=ChatRequest(messages=[Message(role="user", content="hi")]),
        ttft_budget_ms=timeout_ms,
        idle_budget_ms=timeout_ms,
        timeout_ms=timeout_ms,
        now=NOW,
    )


async def test_a_silent_route_with_a_call_in_flight_gets_no_probe(
    demo_policy: PolicyConfig,
) -> None:
    route = SilentRoute()
    acts = _acts(demo_policy, route)
    call = asyncio.create_task(acts.calls.call_model(_call()))
    await asyncio.wait_for(route.reached.wait(), 5)
    # Two intervals later the call still waits: no real call has finished on the route.
    probe = ProbeInput(route=ROUTE, now=NOW + 20, interval_s=10)
    result = await acts.probes.probe_endpoint(probe)
    assert route.requests == ["user"], f"attempts on the primary: {route.requests}"
    assert result.skipped and result.reason == "call_in_flight"
    route.speak.set()
    await call
    assert await acts.deps.health.in_flight.count(ROUTE, NOW + 21) == 0
    later = await acts.probes.probe_endpoint(ProbeInput(route=ROUTE, now=NOW + 40, interval_s=10))
    assert not later.skipped and route.requests == ["user", "probe"]


async def test_a_call_is_in_flight_from_its_role_context_on(demo_policy: PolicyConfig) -> None:
    """The call's lease on the role's first route is taken with its role context's snapshot:
    a probe of that route while the workflow plans and dispatches the attempt is not sent,
    nor while the attempt (holding that lease, taking none of its own) waits on the route;
    once it answered the lease is back and the route is probed again."""
    primary = demo_policy.routes_for("analyst")[0]
    route = SilentRoute(ANTHROPIC)
    acts = _acts(demo_policy, route)
    ctx = await acts.context.role_context(RoleContextInput(role="analyst", now=NOW, lease=True))
    assert ctx.lease is not None and ctx.lease.route == primary
    leases = acts.deps.health.in_flight
    before = await acts.probes.probe_endpoint(ProbeInput(route=primary, now=NOW, interval_s=10))
    assert before.skipped and before.reason == "call_in_flight" and route.requests == []
    timeout_ms = demo_policy.role("analyst").attempt_timeout  # as the planner gives it
    call = asyncio.create_task(acts.calls.call_model(_call(primary, ctx.lease, timeout_ms)))
    await asyncio.wait_for(route.reached.wait(), 5)
    assert await leases.count(primary, NOW + 1) == 1  # the role context's, not a second
    probe = ProbeInput(route=primary, now=NOW + 8, interval_s=5)  # within the lease
    during = await acts.probes.probe_endpoint(probe)
    assert during.skipped and during.reason == "call_in_flight"
    assert route.requests == ["user"], f"attempts on the primary: {route.requests}"
    route.speak.set()
    await call
    assert await leases.count(primary, NOW + 21) == 0
    later = await acts.probes.probe_endpoint(ProbeInput(route=primary, now=NOW + 40, interval_s=10))
    assert not later.skipped and route.requests == ["user", "probe"]
