"""End to end: the primary route reaches its endpoint through the chaos proxy; when the
proxy's timeline turns the outage on, a resilient call on a real worker fails over, and
when it is off, the same call is served by the primary through the proxy."""

from __future__ import annotations

import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.testing.chaos_proxy import ProxyIdentity, ProxyScenario, start_chaos_proxy
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.clock import FakeClock
from agent_failover.testing.sim.server import RunningSimulator
from tests.chaos.conftest import build_worker
from tests.chaos.helpers import PRIMARY
from tests.workflows.conftest import running

pytestmark = [pytest.mark.chaos, pytest.mark.devserver]

#: The primary's whole provider goes down from t=10 s to t=20 s of the proxy's timeline.
OUTAGE = ProxyScenario.model_validate(
    {
        "name": "proxy_outage",
        "events": [{"from": 10, "to": 20, "organisation": "anthropic", "answers": 529}],
    }
)


async def test_resilient_call_fails_over_when_the_proxy_injects_an_outage(
    dev_env: WorkflowEnvironment,
    policy: PolicyConfig,
    simulator: RunningSimulator,
    sim_admin: SimAdmin,
) -> None:
    clock = FakeClock()
    proxy = await start_chaos_proxy(
        simulator.url, OUTAGE, clock=clock, identity=ProxyIdentity(organisation="anthropic")
    )
    primary = type(policy.endpoints[PRIMARY]).model_validate(
        {**policy.endpoints[PRIMARY].model_dump(), "base_url": f"{proxy.url}/{PRIMARY}"}
    )
    proxied = policy.model_copy(update={"endpoints": {**policy.endpoints, PRIMARY: primary}})
    h, workers = build_worker(dev_env.client, proxied)
    try:
        async with running(workers):
            healthy = await h.call("plain", f"summarise {uuid.uuid4().hex[:6]}", max_tokens=64)
            clock.advance(12.0)
            during = await h.call("plain", f"summarise {uuid.uuid4().hex[:6]}", max_tokens=64)
            status = proxy.state.status()
    finally:
        await proxy.stop()

    assert healthy.route == PRIMARY and healthy.tier == 0
    assert during.route != PRIMARY and during.content.strip()
    assert status["phase"] == "fault" and status["counts"]["faults"]["http_error_529"] >= 1
    # The primary's endpoint itself answered only the healthy call: the outage was the
    # proxy's, and the failover target was reached directly.
    per_route = [a["endpoint"] for a in await sim_admin.attempts()]
    assert per_route.count(PRIMARY) == 1 and during.route in per_route
