"""History shapes: the role context is small on the wire and decodes old and new shapes."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_failover.activities.models import RoleContext, policy_ref
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import (
    HealthSnapshot,
    RecentSample,
    RouteHealth,
    WindowStats,
)


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


def _current(policy: PolicyConfig, role: str = "analyst") -> RoleContext:
    """The issue-10 shape: a policy ref, a snapshot with stats, one route with history."""
    ctx = _ctx(policy, role)
    first = next(iter(ctx.snapshot.routes))
    busy = RouteHealth(
        route=first,
        stats=WindowStats(window_s=60.0, calls=3, p95_ms=120.125, latency_samples=3),
        recent=[RecentSample(at=1.5, latency_ms=99.25, ok=True)],
        last_call_at=1.5,
    )
    routes = {
        r: RouteHealth(route=r, stats=WindowStats(window_s=60.0)) for r in ctx.policy.endpoints
    }
    snap = HealthSnapshot(taken_at=2.0, routes={**routes, first: busy})
    return ctx.model_copy(update={"snapshot": snap, "policy_ref": policy_ref(ctx.policy)})


def test_current_shape_round_trips_with_a_compact_snapshot(policy: PolicyConfig) -> None:
    """Route names and the shared window are written once; decoding restores them."""
    ctx = _current(policy)
    data = json.loads(ctx.model_dump_json())
    snap = data["snapshot"]
    assert snap["window_s"] == 60.0
    assert all(
        "route" not in r and "window_s" not in r.get("stats", {}) for r in snap["routes"].values()
    )
    assert sum(r == {} for r in snap["routes"].values()) == len(snap["routes"]) - 1
    assert RoleContext.model_validate(data) == ctx


def test_snapshot_floats_are_rounded_in_history(policy: PolicyConfig) -> None:
    ctx = _current(policy)
    first = next(iter(ctx.snapshot.routes))
    rh = ctx.snapshot.routes[first]
    noisy = rh.model_copy(update={"stats": rh.stats.model_copy(update={"p95_ms": 120.1234567})})
    snap = ctx.snapshot.model_copy(update={"routes": {**ctx.snapshot.routes, first: noisy}})
    back = RoleContext.model_validate_json(
        ctx.model_copy(update={"snapshot": snap}).model_dump_json()
    )
    assert back.snapshot.routes[first].stats.p95_ms == 120.123


def test_a_known_policy_is_left_out_and_restored_by_ref(policy: PolicyConfig) -> None:
    """A run that already holds the policy gets only its ref; it decodes to the same context."""
    ctx = _current(policy)
    RoleContext.model_validate_json(ctx.model_dump_json())  # the run's first call: in full
    short = ctx.model_copy().omitting_policy(True)
    data = json.loads(short.model_dump_json())
    assert "policy" not in data and data["policy_ref"] == ctx.policy_ref
    assert len(short.model_dump_json()) * 2 < len(ctx.model_dump_json())
    assert RoleContext.model_validate(data) == ctx


def test_an_unknown_policy_ref_fails_to_decode(policy: PolicyConfig) -> None:
    data = json.loads(_current(policy).omitting_policy(True).model_dump_json())
    data["policy_ref"] = "0" * 16
    with pytest.raises(ValidationError, match="no earlier call"):
        RoleContext.model_validate(data)
