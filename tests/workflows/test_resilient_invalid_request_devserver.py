"""A 400 on one wire (issue 22 §2.3), on the dev server against the simulator.

One vendor's 400 (a parameter only it rejects) says nothing about another's API: the call
moves to a route on another wire and is answered there; the same API in another region
is not tried. When a second wire rejects the same request too, the request is what is
wrong: the live tiers stop and the call degrades without trying a third.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from agent_failover.resilience.contracts import Capability, ReasonCode
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.testing.sim.admin import SimAdmin
from tests.workflows.conftest import Harness

pytestmark = pytest.mark.devserver

PRIMARY, SAME_WIRE = "anthropic-us-east", "anthropic-eu-west"
BAD_PARAMETER = {"kind": "http_error", "status": 400, "message": "unsupported parameter: top_k"}


def _request() -> ChatRequest:
    text = f"Summarize the failover design {uuid.uuid4().hex[:6]}"
    return ChatRequest(messages=[Message(role="user", content=text)], max_tokens=120)


async def _sent(admin: SimAdmin) -> Counter[str]:
    return Counter(a["endpoint"] for a in await admin.attempts())


async def test_a_400_on_one_wire_is_answered_by_another_wires_route(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    await sim_admin.set_faults(PRIMARY, [BAD_PARAMETER])
    out = await harness.call("plain", _request())
    wire = harness.policy.endpoints
    assert out.capability is Capability.FULL and out.tier == 1
    assert wire[out.route].wire != wire[PRIMARY].wire
    assert [(a.route, a.outcome) for a in out.attempts] == [
        (PRIMARY, "invalid_request"),
        (out.route, "ok"),
    ]
    assert ReasonCode.INVALID_REQUEST in out.reason_codes
    sent = await _sent(sim_admin)
    assert sent == Counter({PRIMARY: 1, out.route: 1}) and SAME_WIRE not in sent


async def test_two_wires_rejecting_the_request_stop_the_live_tiers(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    for route in harness.policy.role("plain").roster.routes():
        await sim_admin.set_faults(route, [BAD_PARAMETER])
    out = await harness.call("plain", _request())
    assert out.capability is Capability.STATIC
    live = [a for a in out.attempts if a.route in harness.policy.endpoints]
    assert [a.outcome for a in live] == ["invalid_request", "invalid_request"]
    wires = {harness.policy.endpoints[a.route].wire for a in live}
    assert len(wires) == 2
    assert sum((await _sent(sim_admin)).values()) == 2
