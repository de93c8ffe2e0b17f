"""The live-tier floor in a real call (issue 22 §2.2), on the dev server.

The primary spends the call's budget (a 3 s deadline, no first token within the 2 s TTFT
budget), so no attempt of tier 1 fits what is left. Before the floor the call went
straight to the static answer with healthy standbys untried; now tier 1 gets its one
attempt with the floor budget and answers.
"""

from __future__ import annotations

import uuid

import pytest

from agent_failover.resilience.contracts import Capability
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.options import CallOptions
from agent_failover.testing.sim.admin import SimAdmin
from tests.workflows.conftest import Harness

pytestmark = pytest.mark.devserver

PRIMARY = "anthropic-us-east"


async def test_a_spent_budget_still_tries_the_standby_tier(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    await sim_admin.set_faults(PRIMARY, [{"kind": "slow_first_token", "seconds": 30}])
    text = f"floor {uuid.uuid4().hex[:6]}"
    request = ChatRequest(messages=[Message(role="user", content=text)], max_tokens=60)
    out = await harness.call("plain", request, options=CallOptions(deadline_ms=3_000))
    assert out.capability is Capability.FULL and out.tier == 1
    first, answer = out.attempts
    assert first.route == PRIMARY and first.outcome == "slow_first_token"
    # It started once the primary had left less than the TTFT budget of the deadline.
    assert (answer.started_at - first.started_at) * 1000 > 3_000 - 2_000
    assert answer.outcome == "ok"


async def test_a_floor_of_zero_keeps_the_budget_a_hard_limit(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    plain = harness.policy.roles["plain"]
    harness.policy.roles["plain"] = plain.model_copy(update={"live_tier_floor_ms": 0.0})
    await sim_admin.set_faults(PRIMARY, [{"kind": "slow_first_token", "seconds": 30}])
    text = f"hard {uuid.uuid4().hex[:6]}"
    request = ChatRequest(messages=[Message(role="user", content=text)], max_tokens=60)
    out = await harness.call("plain", request, options=CallOptions(deadline_ms=3_000))
    assert out.capability is Capability.STATIC
    assert [a.route for a in out.attempts if a.route in harness.policy.endpoints] == [PRIMARY]
