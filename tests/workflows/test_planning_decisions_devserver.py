"""Failover decisions on the dev server (real activity timing) against the simulator.

A short Retry-After is waited out on the same route through Temporal; a context-length
rejection teaches the store the route's real window; a half-open primary takes no user
call while a healthy standby exists; a latency-demoted route comes back on probes alone.
Each docstring says what the code before this change did instead.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import BreakerSettings, PolicyConfig
from agent_failover.resilience.contracts import (
    AgentOutput,
    BreakerState,
    CallOutcome,
    ReasonCode,
)
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import MonitorInput
from agent_failover.workflows.monitor import HealthMonitorWorkflow
from tests.workflows.conftest import Harness, make_harness, running
from tests.workflows.helpers import CallInput, ResilientCallWorkflow

pytestmark = pytest.mark.devserver

PRIMARY, OTHER_PROVIDER, CHEAP = "anthropic-us-east", "openai-us", "cheap-mini"


def _request(text: str | None = None) -> ChatRequest:
    body = text or f"decide {uuid.uuid4().hex[:6]}"
    return ChatRequest(messages=[Message(role="user", content=body)], max_tokens=120)


async def _start(h: Harness, role: str = "plain", request: ChatRequest | None = None):
    return await h.client.start_workflow(
        ResilientCallWorkflow.run,
        CallInput(role=role, request=request or _request()),
        id=f"call-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=AgentOutput,
    )


async def _per_route(admin: SimAdmin) -> Counter[str]:
    return Counter(a["endpoint"] for a in await admin.attempts())


async def _until_seen(admin: SimAdmin, route: str, n: int, timeout_s: float = 10.0) -> None:
    """Poll the simulator's attempt log until ``route`` was called ``n`` times."""
    deadline = time.monotonic() + timeout_s
    while (await _per_route(admin))[route] < n:
        assert time.monotonic() < deadline, f"{route} never reached {n} attempts"
        await asyncio.sleep(0.02)


async def test_short_retry_after_is_waited_out_on_the_same_route(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """429 with Retry-After 1.5 s (< rate_limit.max_wait_ms 2 s): the primary answers on a
    Temporal retry after exactly that delay; no other route is touched and the primary
    is usable right after (before: failover to tier 1 at once, and the primary's breaker
    opened for its open duration)."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "rate_limit", "retry_after": 1.5}])
    t0 = time.monotonic()
    handle = await _start(harness)
    await _until_seen(sim_admin, PRIMARY, 1)
    await sim_admin.clear()
    out: AgentOutput = await handle.result()
    waited = time.monotonic() - t0
    assert out.route == PRIMARY and out.tier == 0 and not out.degraded
    assert [a.outcome for a in out.attempts] == ["ok"]
    assert "same-route attempt 2" in out.attempts[0].note
    assert waited >= 1.5
    assert await _per_route(sim_admin) == Counter({PRIMARY: 2})
    b = await harness.health.breaker(PRIMARY)
    assert b.state is BreakerState.CLOSED and b.cooldown_until is not None
    nxt = await (await _start(harness)).result()
    assert nxt.route == PRIMARY


async def test_retry_after_past_the_deadline_fails_over_at_once(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A Retry-After above max_wait_ms is never waited: one primary attempt, then tier 1."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "rate_limit", "retry_after": 5}])
    out: AgentOutput = await (await _start(harness)).result()
    assert out.route != PRIMARY and out.tier == 1
    assert ReasonCode.RATE_LIMITED in out.reason_codes
    first = out.attempts[0]
    assert (first.route, first.outcome, first.retry_after_s) == (PRIMARY, "rate_limited", 5.0)
    assert (await _per_route(sim_admin))[PRIMARY] == 1


@pytest_asyncio.fixture
async def ctx_harness(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    """A role ``ctx``: tier 0 cheap-mini, configured with 200k though the simulator's model
    holds 32k; tier 1 openai-us with no configured window (the simulator's holds 128k)."""
    eps = dict(policy.endpoints)
    eps[CHEAP] = eps[CHEAP].model_copy(update={"context_window": 200_000})
    eps[OTHER_PROVIDER] = eps[OTHER_PROVIDER].model_copy(update={"context_window": None})
    plain = policy.role("plain")
    roster = plain.roster.model_copy(update={"tier0": [CHEAP], "tier1": [OTHER_PROVIDER]})
    roster = roster.model_copy(update={"tier2": []})
    ctx = plain.model_copy(update={"name": "ctx", "roster": roster})
    p = policy.model_copy(update={"endpoints": eps, "roles": {**policy.roles, "ctx": ctx}})
    h, workers = await make_harness(dev_env.client, p)
    async with running(workers):
        yield h


async def test_context_window_is_learned_and_used(
    ctx_harness: Harness, sim_admin: SimAdmin
) -> None:
    """A 40k-token prompt: cheap-mini rejects it stating 32000; the store learns it and the
    call fails over to the route whose window is unknown (tried, not assumed 128k). The
    next call skips cheap-mini by its learned window (before: every call tried it again)."""
    big = ChatRequest(messages=[Message(role="user", content="word " * 32_000)], max_tokens=120)
    out1: AgentOutput = await (await _start(ctx_harness, "ctx", big)).result()
    assert out1.route == OTHER_PROVIDER and ReasonCode.CONTEXT_TOO_LONG in out1.reason_codes
    assert ReasonCode.CONTEXT_TRUNCATED not in out1.reason_codes
    snap = await ctx_harness.health.snapshot([CHEAP], now=time.time(), window_s=60, min_calls=1)
    assert snap.get(CHEAP).context_window == 32_000
    out2: AgentOutput = await (await _start(ctx_harness, "ctx", big)).result()
    assert out2.route == OTHER_PROVIDER
    [skip] = [a for a in out2.attempts if a.route == CHEAP]
    assert skip.outcome == "skipped" and "32000 tokens (learned)" in skip.note
    assert await _per_route(sim_admin) == Counter({CHEAP: 1, OTHER_PROVIDER: 2})


async def _open_in_the_past(h: Harness, route: str) -> None:
    """Trip ``route``'s breaker 60 s ago, so it is past open_until now (half-open)."""
    settings = h.policy.breaker_for(route)
    t = time.time() - 60
    for i in range(settings.min_calls):
        out = CallOutcome(
            route=route, at=t + i * 0.1, ok=False, error_class=ErrorClass.SERVER_ERROR
        )
        await h.health.record(out, settings)
    assert (await h.health.breaker(route)).state is BreakerState.OPEN


@pytest_asyncio.fixture
async def default_trials(
    dev_env: WorkflowEnvironment, policy: PolicyConfig
) -> AsyncIterator[Harness]:
    """The demo policy with the default share of real-call trials (0; the demo admits half)."""
    default_share = BreakerSettings().half_open_call_fraction
    b = policy.breaker.model_copy(update={"half_open_call_fraction": default_share})
    h, workers = await make_harness(dev_env.client, policy.model_copy(update={"breaker": b}))
    async with running(workers):
        yield h


async def test_half_open_primary_takes_no_user_call_by_default(
    default_trials: Harness, sim_admin: SimAdmin
) -> None:
    """The primary's breaker is past open_until (a half-open trial would be due): with the
    default half_open_call_fraction 0 the user's call goes to a healthy standby and the
    primary is left to the probes (before: the call itself was the trial)."""
    harness = default_trials
    await _open_in_the_past(harness, PRIMARY)
    out: AgentOutput = await (await _start(harness)).result()
    assert out.route != PRIMARY and out.tier == 1
    [skip] = [a for a in out.attempts if a.route == PRIMARY]
    assert skip.outcome == "skipped" and "half-open" in skip.note
    assert (await _per_route(sim_admin))[PRIMARY] == 0


async def test_demo_policy_sends_half_of_the_calls_as_trials_and_closes_on_them(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """The demo policy admits half of the calls to a half-open route as real trials (the
    drill's return to the primary: 4.6 s on probes alone, ~0.4-1.3 s with trials). Each
    call draws its ticket from the workflow's seeded random, so over 20 calls the primary
    answers some (all but certain: 1 - 2^-20) and its breaker closes after three good ones."""
    assert harness.policy.breaker_for(PRIMARY).half_open_call_fraction == 0.5
    await _open_in_the_past(harness, PRIMARY)
    closed_at = None
    routes = []
    for i in range(20):
        out: AgentOutput = await (await _start(harness)).result()
        routes.append(out.route)
        assert out.tier == (0 if out.route == PRIMARY else 1), out  # a trial, or a standby
        if closed_at is None and (await harness.health.breaker(PRIMARY)).state is (
            BreakerState.CLOSED
        ):
            closed_at = i
    on_primary = [i for i, r in enumerate(routes) if r == PRIMARY]
    assert on_primary, routes
    if len(on_primary) >= 3:  # three good trials in a row close it (nothing failed here)
        assert closed_at == on_primary[2], (closed_at, on_primary)
        assert set(routes[closed_at:]) == {PRIMARY}, routes  # closed: every call again
    assert (await _per_route(sim_admin))[PRIMARY] == len(on_primary)


@pytest_asyncio.fixture
async def sla_harness(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    """Role ``sla``: the default SLA window (60 s), min_samples (10) and restore_after (3),
    with a 300 / 600 ms line so a demotion can be set up in real time."""
    plain = policy.role("plain")
    sla = plain.sla.model_copy(update={"p95_ms": 300.0, "p99_ms": 600.0})
    role = plain.model_copy(update={"name": "sla", "sla": sla})
    p = policy.model_copy(update={"roles": {**policy.roles, "sla": role}})
    h, workers = await make_harness(dev_env.client, p)
    async with running(workers):
        yield h


async def test_latency_demoted_route_comes_back_on_probes(
    sla_harness: Harness, sim_admin: SimAdmin
) -> None:
    """Demoted for its SLA, the primary recovers; with a 1 s probe interval it is restored
    within interval x (restore_after + 1) = 4 s (+ scheduling slack) and then stays
    restored (before: 60 s windows never held min_samples probe samples: never restored)."""
    h = sla_harness
    settings = h.policy.breaker_for(PRIMARY)
    now = time.time()
    for i in range(12):
        slow = CallOutcome(route=PRIMARY, at=now - 12 + i, ok=True, latency_ms=2000.0, role="sla")
        await h.health.record(slow, settings)
    out: AgentOutput = await (await _start(h, "sla")).result()
    assert out.route != PRIMARY and ReasonCode.SLA_DEMOTED in out.reason_codes
    recovered = time.monotonic()
    monitor = await h.client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(routes=[PRIMARY], interval_s=1.0),
        id=f"monitor-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
    )
    try:
        while True:
            out = await (await _start(h, "sla")).result()
            if out.route == PRIMARY:
                break
            assert time.monotonic() - recovered < 4.0 + 4.0, "not restored in time"
            await asyncio.sleep(0.25)
        restored_after = time.monotonic() - recovered
        for _ in range(5):
            out = await (await _start(h, "sla")).result()
            assert out.route == PRIMARY and ReasonCode.SLA_DEMOTED not in out.reason_codes
    finally:
        await monitor.terminate()
    assert restored_after < 8.0


async def test_healed_primary_returns_within_two_probe_intervals(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Real activity timing: the primary's breaker is open for 60 s; once it heals, probes
    every 3 s (the demo policy's; half-open every 0.75 s) bring real traffic back within
    2 intervals, where before it waited out the open duration, and the outage's errors
    still in the error window do not re-trip it."""
    h = harness
    await sim_admin.set_faults(PRIMARY, [{"kind": "server_error"}])
    now = time.time()
    settings = h.policy.breaker_for(PRIMARY).model_copy(update={"open_duration_s": 60.0})
    for i in range(settings.min_calls):
        at = now - 1 + i * 0.01
        failed = CallOutcome(route=PRIMARY, at=at, ok=False, error_class=ErrorClass.SERVER_ERROR)
        await h.health.record(failed, settings)
    assert (await h.health.breaker(PRIMARY)).state is BreakerState.OPEN
    monitor = await h.client.start_workflow(
        HealthMonitorWorkflow.run,
        MonitorInput(routes=[PRIMARY], interval_s=3.0),
        id=f"monitor-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
    )
    try:
        await _until_seen(sim_admin, PRIMARY, 2)  # failed probes while open
        assert (await h.health.breaker(PRIMARY)).state is BreakerState.OPEN
        await sim_admin.clear()
        healed = time.monotonic()
        while (await h.health.breaker(PRIMARY)).state is not BreakerState.CLOSED:
            assert time.monotonic() - healed < 10.0, "never closed"
            await asyncio.sleep(0.05)
        closed_after = time.monotonic() - healed
        for _ in range(3):  # no flapping: the outage's errors are before the close
            out: AgentOutput = await (await _start(h)).result()
            assert out.route == PRIMARY and out.tier == 0
        assert (await h.health.breaker(PRIMARY)).state is BreakerState.CLOSED
    finally:
        await monitor.terminate()
    assert closed_after <= 2 * 3.0
