"""History shapes: the role context is small on the wire and decodes back whole."""

from __future__ import annotations

import json
import random

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_failover.activities.models import (
    CacheWrite,
    CallModelInput,
    CallModelResult,
    HeldLease,
    RoleContext,
    llm_task_queue,
)
from agent_failover.activities.policy_registry import (
    POLICY_REGISTRY,
    PolicyVersionMissing,
    policy_ref,
)
from agent_failover.activities.snapshot_history import UNSTATED_TIME
from agent_failover.resilience.cachekey import cache_key
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import (
    BreakerState,
    HealthSnapshot,
    RecentSample,
    RouteHealth,
    WindowStats,
)
from agent_failover.resilience.models import ChatReply, ChatRequest, Message
from agent_failover.resilience.plan import RequestFacts
from agent_failover.resilience.planner import plan
from agent_failover.resilience.shadow import primary_restored


def _ctx(policy: PolicyConfig, role: str = "analyst") -> RoleContext:
    sub = policy.subset_for(role)
    snap = HealthSnapshot(taken_at=1.0, routes={r: RouteHealth(route=r) for r in sub.endpoints})
    return RoleContext(
        role=policy.role(role),
        policy=sub,
        snapshot=snap,
        task_queue="q",
        policy_ref=policy_ref(sub),
    )


def test_role_context_round_trips_small(policy: PolicyConfig) -> None:
    """Encoded, the role travels by name and defaults are dropped; decoding restores it all,
    in less than half the bytes of the full shape."""
    ctx = _ctx(policy)
    [payload] = pydantic_data_converter.payload_converter.to_payloads([ctx])
    assert json.loads(payload.data)["role"] == "analyst"
    full = len(ctx.role.model_dump_json()) + len(ctx.policy.model_dump_json())
    assert len(payload.data) * 2 < full + len(ctx.snapshot.model_dump_json())
    [back] = pydantic_data_converter.payload_converter.from_payloads([payload], [RoleContext])
    assert back == _decoded(ctx)


def test_overridden_role_travels_in_full(policy: PolicyConfig) -> None:
    """A role that differs from the policy's copy is sent whole, not by name."""
    ctx = _ctx(policy)
    changed = ctx.model_copy(update={"role": ctx.role.model_copy(update={"critical": True})})
    data = json.loads(changed.model_dump_json())
    assert isinstance(data["role"], dict)
    assert RoleContext.model_validate(data).role.critical


def _current(policy: PolicyConfig, role: str = "analyst") -> RoleContext:
    """The current shape: a policy ref, a snapshot with stats, one route with history."""
    ctx = _ctx(policy, role)
    first = next(iter(ctx.snapshot.routes))
    busy = RouteHealth(
        route=first,
        stats=WindowStats(window_s=60.0, p95_ms=120.125, latency_samples=3),
        recent=[RecentSample(at=1.5, latency_ms=99.25, ok=True)],
    )
    routes = {
        r: RouteHealth(route=r, stats=WindowStats(window_s=60.0)) for r in ctx.policy.endpoints
    }
    snap = HealthSnapshot(taken_at=2.0, routes={**routes, first: busy})
    # Built as the activity builds it: constructing it registers the policy by its ref.
    return RoleContext(
        role=ctx.role,
        policy=ctx.policy,
        snapshot=snap,
        task_queue="q",
        policy_ref=policy_ref(ctx.policy),
    )


def _decoded(ctx: RoleContext) -> RoleContext:
    """``ctx`` as history decodes it: the snapshot's time is left to the workflow (its own
    ``now``, see ``resilient._load_context``)."""
    snap = ctx.snapshot.model_copy(update={"taken_at": UNSTATED_TIME})
    return ctx.model_copy(update={"snapshot": snap})


def test_current_shape_round_trips_with_a_compact_snapshot(policy: PolicyConfig) -> None:
    """Route names and the shared window are written once; decoding restores them."""
    ctx = _current(policy)
    data = json.loads(ctx.model_dump_json())
    snap = data["snapshot"]
    assert "window_s" not in snap  # the role's SLA window (60 s): restored from the role
    assert all(
        "route" not in r and "window_s" not in r.get("stats", {}) for r in snap["routes"].values()
    )
    assert sum(r == {} for r in snap["routes"].values()) == len(snap["routes"]) - 1
    assert RoleContext.model_validate(data) == _decoded(ctx)


def test_a_by_ref_context_leaves_out_what_the_workflow_knows(policy: PolicyConfig) -> None:
    """The workflow's own queue, the role's SLA window and an all-idle snapshot are left
    out of history; decoding inside the workflow puts them back."""
    ctx = _current(policy)
    idle = ctx.snapshot.model_copy(
        update={
            "routes": {
                n: RouteHealth(route=n, stats=WindowStats(window_s=ctx.role.sla.window_s))
                for n in ctx.snapshot.routes
            }
        }
    )
    ctx = ctx.model_copy(update={"snapshot": idle}).for_history(False, own_queue="q")
    data = json.loads(ctx.model_dump_json())
    assert set(data) == {"role", "policy_ref", "overflow_queue"}, data
    assert data["overflow_queue"] is False  # no overflow queue: said, as it is not implied
    back = RoleContext.model_validate(data).on_queue("q")
    assert back.role == ctx.role and back.task_queue == "q"
    assert back.snapshot.routes.keys() == ctx.snapshot.routes.keys()
    assert all(r.stats.window_s == ctx.role.sla.window_s for r in back.snapshot.routes.values())
    # Eager dispatch: the overflow queue beside the workflow's own is implied with it.
    eager = ctx.model_copy(update={"overflow_queue": llm_task_queue("q", ctx.role.bulkhead)})
    data = json.loads(eager.for_history(False, own_queue="q").model_dump_json())
    assert set(data) == {"role", "policy_ref"}, data
    assert RoleContext.model_validate(data).on_queue("q").overflow_queue == eager.overflow_queue
    # Another workflow queue is written out.
    other = json.loads(ctx.for_history(False, own_queue="elsewhere").model_dump_json())
    assert other["task_queue"] == "q"


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


def test_the_policy_travels_by_ref_only(policy: PolicyConfig) -> None:
    """Every call's context carries the policy's ref, never the policy; it decodes whole."""
    ctx = _current(policy)
    data = json.loads(ctx.model_dump_json())
    assert "policy" not in data and data["policy_ref"] == ctx.policy_ref
    assert len(ctx.model_dump_json()) < 600
    assert RoleContext.model_validate(data) == _decoded(ctx)


def test_an_unknown_policy_ref_fails_with_what_to_do(policy: PolicyConfig) -> None:
    """The error names the ref, the role and the store looked in, and how to recover; it is
    not a ValueError, so Temporal fails the workflow task (retried), not the run."""
    data = json.loads(_current(policy).model_dump_json())
    data["policy_ref"] = "0" * 16
    POLICY_REGISTRY.add_store("directory /srv/policies")
    with pytest.raises(PolicyVersionMissing) as err:
        RoleContext.model_validate(data)
    msg = str(err.value)
    assert "0" * 16 in msg and "'analyst'" in msg and "directory /srv/policies" in msg
    assert "FAILOVER_POLICY_DIR" in msg and "REDIS_URL" in msg and "retried" in msg
    assert not isinstance(err.value, ValueError)


def _busy_route(rng: random.Random, route: str, now: float) -> RouteHealth:
    """A route in a random state, its floats already at the history's 3 decimals."""
    state = rng.choice(list(BreakerState))
    demoted = rng.random() < 0.4
    calls = rng.randint(0, 40)
    return RouteHealth(
        route=route,
        breaker=state,
        open_until=now + rng.choice([-5, 5]) if state is BreakerState.OPEN else None,
        breaker_reason="error rate" if state is BreakerState.OPEN else None,
        stats=WindowStats(
            window_s=60.0,
            calls=calls,
            errors=calls // 3,
            error_rate=round(rng.random() / 2, 3),
            semantic_failure_rate=round(rng.random() / 4, 3),
            slow_call_rate=0.5,
            p50_ms=100.0,
            p95_ms=rng.choice([None, 900.5, 7000.0, 13000.0]),
            p99_ms=rng.choice([None, 1000.0, 14000.0]),
            ttft_p50_ms=10.0,
            ttft_p95_ms=rng.choice([None, 300.0, 2500.0]),
            enough_samples=calls > 10,
            probes=2,
            latency_samples=rng.choice([0, calls]),
        ),
        sla_demoted=demoted,
        sla_since=rng.choice([None, now - 30.0, now - 300.0]),
        recent=[
            RecentSample(
                at=now - 3 + i, latency_ms=rng.choice([50.0, 9000.0]), ok=rng.random() < 0.7
            )
            for i in range(rng.randint(0, 3))
        ],
        cooldown_until=rng.choice([None, now + 2.0, now - 2.0]),
        last_call_at=now - 1.0,
        last_probe_at=now - 2.0,
        last_probe_ok=True,
        quality_regressed=rng.random() < 0.2,
    )


def _role_stats(rng: random.Random, stats: WindowStats) -> WindowStats:
    """A role's own view of a route: none of its calls, the route's own numbers (the role
    is its only caller), or numbers of its own."""
    return rng.choice(
        [
            WindowStats(window_s=stats.window_s),
            WindowStats(
                window_s=stats.window_s,
                calls=stats.latency_samples,
                p95_ms=stats.p95_ms,
                p99_ms=stats.p99_ms,
                latency_samples=stats.latency_samples,
            ),
            WindowStats(window_s=stats.window_s, calls=3, p95_ms=8000.0, latency_samples=3),
        ]
    )


@pytest.mark.parametrize("seed", range(40))
def test_trimmed_snapshot_plans_the_same(policy: PolicyConfig, seed: int) -> None:
    """What history leaves out of the snapshot is never read by planning: the plan, the
    restored-primary check and the summary route are the same from the decoded snapshot
    (read for a role, with its own stats per route, in every other seed)."""
    rng, now = random.Random(seed), 1000.0
    sub = policy.subset_for("analyst")
    routes = {r: _busy_route(rng, r, now) for r in sub.endpoints}
    if seed % 2:
        routes = {
            r: rh.model_copy(update={"role_stats": _role_stats(rng, rh.stats)})
            for r, rh in routes.items()
        }
    ctx = RoleContext(
        role=policy.role("analyst"),
        policy=sub,
        snapshot=HealthSnapshot(taken_at=now, routes=routes),
        task_queue="q",
        policy_ref=policy_ref(sub),
    )
    back = RoleContext.model_validate_json(ctx.model_dump_json())
    assert back.snapshot != ctx.snapshot  # something was left out
    facts = RequestFacts(
        input_tokens=500, max_output_tokens=256, trial_ticket=rng.random(), min_input_tokens=100
    )
    assert plan(ctx.role, sub, back.snapshot, facts, now) == plan(
        ctx.role, sub, ctx.snapshot, facts, now
    )
    assert primary_restored(ctx.role, back.snapshot, now) == primary_restored(
        ctx.role, ctx.snapshot, now
    )
    plain = RoleContext.model_validate_json(ctx.for_history(False).model_dump_json())
    assert plan(ctx.role, sub, plain.snapshot, facts, now) == plan(
        ctx.role, sub, ctx.snapshot, facts, now
    )


def test_a_role_read_snapshot_writes_only_what_the_role_adds(policy: PolicyConfig) -> None:
    """Read for a role, an idle route (role and route stats both empty) says nothing and
    a route the role alone calls writes its numbers once; both decode back whole."""
    ctx = _ctx(policy)
    primary = next(iter(ctx.snapshot.routes))
    busy = WindowStats(window_s=60.0, calls=8, p95_ms=91.0, p99_ms=92.0, latency_samples=8)
    routes = {
        r: rh.model_copy(
            update={"stats": busy if r == primary else rh.stats}
            | {"role_stats": busy if r == primary else WindowStats(window_s=rh.stats.window_s)}
        )
        for r, rh in ctx.snapshot.routes.items()
    }
    ctx = ctx.model_copy(update={"snapshot": ctx.snapshot.model_copy(update={"routes": routes})})
    written = json.loads(ctx.model_dump_json())["snapshot"]
    assert list(written["routes"]) == [primary]
    assert "role_stats" not in written["routes"][primary]
    back = RoleContext.model_validate_json(ctx.model_dump_json())
    for r, rh in back.snapshot.routes.items():
        want = routes[r].role_stats
        assert rh.role_stats is not None and want is not None
        assert (rh.role_stats.p95_ms, rh.role_stats.p99_ms, rh.role_stats.latency_samples) == (
            want.p95_ms,
            want.p99_ms,
            want.latency_samples,
        )


def test_a_primary_whose_newest_observation_failed_is_not_restored_after_decoding(
    policy: PolicyConfig,
) -> None:
    """Undemoted routes keep only their newest observation in history: the one a re-run's
    "primary restored" check reads."""
    ctx = _current(policy)
    primary = ctx.role.roster.tier0[0]
    failed = [RecentSample(at=1.0, latency_ms=50.0, ok=True)] * 2 + [
        RecentSample(at=1.5, latency_ms=50.0, ok=False)
    ]
    routes = {**ctx.snapshot.routes, primary: RouteHealth(route=primary, recent=failed)}
    ctx = ctx.model_copy(update={"snapshot": ctx.snapshot.model_copy(update={"routes": routes})})
    back = RoleContext.model_validate_json(ctx.model_dump_json())
    assert back.snapshot.routes[primary].recent == failed[-1:]
    assert primary_restored(back.role, back.snapshot, 2.0) is None


def _attempt(key: str | None = None) -> CallModelInput:
    request = ChatRequest(system="Be brief.", messages=[Message(role="user", content="hi")])
    return CallModelInput(
        role="plain",
        route="anthropic-us-east",
        request=request,
        ttft_budget_ms=2000.0,
        idle_budget_ms=2000.0,
        timeout_ms=10000.0,
        now=1.0,
        cache=CacheWrite(key=key or cache_key("plain", request), keep_s=1800.0),
    )


def test_an_attempt_leaves_out_a_cache_key_its_request_derives() -> None:
    """The usual key (the call's request is the attempt's) is derived again on decode."""
    inp = _attempt()
    [payload] = pydantic_data_converter.payload_converter.to_payloads([inp])
    assert json.loads(payload.data)["cache"] == {"keep_s": 1800.0}
    [back] = pydantic_data_converter.payload_converter.from_payloads([payload], [CallModelInput])
    assert back == inp


def test_an_attempt_whose_request_was_changed_carries_the_call_key() -> None:
    """A triaged or re-prompted attempt caches under the call's key, which travels."""
    inp = _attempt(key="f" * 64)
    data = json.loads(inp.model_dump_json())
    assert data["cache"]["key"] == "f" * 64
    assert CallModelInput.model_validate(data) == inp


def test_a_plain_call_keeps_no_observation_a_streak_does_not_read(policy: PolicyConfig) -> None:
    """Outside a re-run, an undemoted route's recent observations stay out of history;
    routes with nothing but defaults are left out and restored from the policy."""
    ctx = _current(policy).for_history(newest_observation=False)
    data = json.loads(ctx.model_dump_json())
    (only,) = data["snapshot"]["routes"].values()
    assert "recent" not in only and "stats" in only
    back = RoleContext.model_validate(data)
    assert set(back.snapshot.routes) == set(ctx.snapshot.routes)
    assert all(not r.recent for r in back.snapshot.routes.values())


def test_an_attempt_leaves_out_an_idle_budget_equal_to_the_ttft_budget() -> None:
    inp = _attempt()
    assert "idle_budget_ms" not in json.loads(inp.model_dump_json())
    other = inp.model_copy(update={"idle_budget_ms": 500.0})
    assert CallModelInput.model_validate_json(other.model_dump_json()) == other
    assert CallModelInput.model_validate_json(inp.model_dump_json()) == inp


def test_the_bulkhead_overflow_queue_is_derived_from_queue_and_role(policy: PolicyConfig) -> None:
    """Eager dispatch's overflow queue is the role's bulkhead queue: a flag in history."""
    ctx = _current(policy)
    queue = llm_task_queue("q", ctx.role.bulkhead)
    eager = ctx.model_copy(update={"overflow_queue": queue})
    data = json.loads(eager.model_dump_json())
    assert data["overflow_queue"] is True
    assert RoleContext.model_validate(data).overflow_queue == queue
    other = ctx.model_copy(update={"overflow_queue": "elsewhere"})
    assert RoleContext.model_validate_json(other.model_dump_json()).overflow_queue == "elsewhere"


def _result(endpoint: str = "anthropic-us-east", finish: str = "stop") -> CallModelResult:
    reply = ChatReply(text="ok", endpoint=endpoint, model="m", finish_reason=finish)
    return CallModelResult(reply=reply)


def test_a_result_leaves_out_its_route_and_a_stop_finish() -> None:
    """The workflow knows the route it scheduled (it restores the endpoint) and ``stop`` is
    the usual finish; anything else travels."""
    data = json.loads(_result().for_route("anthropic-us-east").model_dump_json())
    assert data["reply"] == {"text": "ok", "model": "m"}
    back = CallModelResult.model_validate(data)
    assert back.reply.finish_reason == "stop" and back.reply.endpoint == ""
    other = _result(endpoint="elsewhere", finish="length").for_route("anthropic-us-east")
    assert CallModelResult.model_validate_json(other.model_dump_json()).reply == other.reply


def test_an_attempt_leaves_out_its_leases_route_when_it_is_its_own() -> None:
    """The role context's lease travels to the first attempt: without its route when that
    is the attempt's (decoded back), with it when the attempt is elsewhere."""
    inp = _attempt().model_copy(
        update={"lease": HeldLease(route="anthropic-us-east", id="ab", until=21.0)}
    )
    assert json.loads(inp.model_dump_json())["lease"] == {"id": "ab", "until": 21.0}
    assert CallModelInput.model_validate_json(inp.model_dump_json()) == inp
    other = inp.model_copy(update={"route": "openai-us"})
    assert json.loads(other.model_dump_json())["lease"]["route"] == "anthropic-us-east"
    assert CallModelInput.model_validate_json(other.model_dump_json()) == other
    assert "lease" not in json.loads(_attempt().model_dump_json())


def test_a_role_context_carries_its_lease_only_when_it_took_one(policy: PolicyConfig) -> None:
    ctx = _current(policy)
    assert "lease" not in json.loads(ctx.model_dump_json())
    held = ctx.model_copy(update={"lease": HeldLease(route="r", id="ab", until=21.0)})
    data = json.loads(held.model_dump_json())
    assert data["lease"] == {"route": "r", "id": "ab", "until": 21.0}
    assert RoleContext.model_validate(data).lease == held.lease
