"""A call that finds every one of the worker's connection slots to a route busy is counted
in ``failover.local_saturations`` (route, bulkhead, role) and is a span event."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import yaml
from opentelemetry import trace
from temporalio.exceptions import ApplicationError

from agent_failover.activities.llm import LLMActivitySet
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import parse_policy
from agent_failover.providers.client import build_http_client
from agent_failover.resilience.errors import ErrorClass
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.telemetry import names
from tests.activities.test_model_call_rate_budget import ROLE, ROUTE, T0, _call, _reply
from tests.telemetry.conftest import Captured
from tests.telemetry.test_setup import _points


async def test_a_saturated_call_is_counted_with_its_route_and_bulkhead(
    captured: Captured,
) -> None:
    """One connection slot on the route, held by a call the provider has not answered: the
    next call gives up after the connect budget and is counted once with the route, the
    role's bulkhead and the role; the held call, once answered, is not."""
    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    data["endpoints"][ROUTE]["max_connections"] = 1
    policy = parse_policy(data, env={})
    release = asyncio.Event()

    async def respond(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return _reply(request)

    http = build_http_client(transport=httpx.MockTransport(respond))
    acts = LLMActivitySet(
        policy,
        http,
        MemoryHealthStore(),
        MemoryResponseCache(),
        task_queue_for=lambda r: "q",
        connect_timeout_s=0.05,
    ).calls
    async with http:
        held = asyncio.create_task(acts.call_model(_call(T0)))
        for _ in range(1000):
            if http.endpoint_slots.in_use(policy.endpoint(ROUTE)) or held.done():
                break
            await asyncio.sleep(0.001)
        assert not held.done(), held.exception()
        with trace.get_tracer("test").start_as_current_span("attempt"):
            with pytest.raises(ApplicationError) as info:
                await acts.call_model(_call(T0 + 1))
        release.set()
        assert (await held).reply.text == "ok"
    assert info.value.type == ErrorClass.LOCAL_SATURATION.value
    (point,) = _points(captured.reader)[names.LOCAL_SATURATIONS]
    bulkhead = policy.role(ROLE).bulkhead
    assert point.value == 1
    assert dict(point.attributes) == {"route": ROUTE, "bulkhead": bulkhead, "role": ROLE}
    (span,) = [s for s in captured.spans.get_finished_spans() if s.name == "attempt"]
    assert names.EV_LOCAL_SATURATION in [e.name for e in span.events]
