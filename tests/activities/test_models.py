"""History shapes: the role context is small on the wire and decodes old and new shapes."""

from __future__ import annotations

import json

from temporalio.contrib.pydantic import pydantic_data_converter

from agent_failover.activities.models import RoleContext
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import HealthSnapshot, RouteHealth


def _ctx(policy: PolicyConfig, role: str = "analyst") -> RoleContext:
    sub = policy.subset_for(role)
    snap = HealthSnapshot(taken_at=1.0, routes={r: RouteHealth(route=r) for r in sub.endpoints})
    return RoleContext(role=policy.role(role), policy=sub, snapshot=snap, task_queue="q")


def test_role_context_round_trips_small(policy: PolicyConfig) -> None:
    """Encoded, the role travels by name and defaults are dropped; decoding restores it all,
    in less than half the bytes of the full shape."""
    ctx = _ctx(policy)
    [payload] = pydantic_data_converter.payload_converter.to_payloads([ctx])
    assert json.loads(payload.data)["role"] == "analyst"
    full = len(ctx.role.model_dump_json()) + len(ctx.policy.model_dump_json())
    assert len(payload.data) * 2 < full + len(ctx.snapshot.model_dump_json())
    [back] = pydantic_data_converter.payload_converter.from_payloads([payload], [RoleContext])
    assert back == ctx


def test_role_context_decodes_the_full_shape(policy: PolicyConfig) -> None:
    """A history recorded before (role and policy in full, defaults included) still decodes."""
    ctx = _ctx(policy)
    old = {
        "role": ctx.role.model_dump(mode="python"),
        "policy": ctx.policy.model_dump(mode="python"),
        "snapshot": ctx.snapshot.model_dump(mode="python"),
        "task_queue": "q",
    }
    assert RoleContext.model_validate(old) == ctx


def test_overridden_role_travels_in_full(policy: PolicyConfig) -> None:
    """A role that differs from the policy's copy is sent whole, not by name."""
    ctx = _ctx(policy)
    changed = ctx.model_copy(update={"role": ctx.role.model_copy(update={"critical": True})})
    data = json.loads(changed.model_dump_json())
    assert isinstance(data["role"], dict)
    assert RoleContext.model_validate(data).role.critical
