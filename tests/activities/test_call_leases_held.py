"""The role context's in-flight lease in the attempt that follows it (issue 24): held by the
first try of the attempt on its route when it covers the attempt, else given back with
the attempt's own lease, however the attempt ends."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from temporalio.exceptions import ApplicationError

from agent_failover.activities.call_leases import LEASE_GRACE_S, AttemptLeases
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import CallModelInput, HeldLease, RoleContextInput
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.contracts import BreakerState
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.outcomes import BREAKER_REJECTED
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.embedded_redis import EmbeddedRedis
from agent_failover.stores.health import MemoryHealthStore, RedisHealthStore
from agent_failover.stores.in_flight import LeaseEnd, MemoryInFlight
from agent_failover.stores.redis_link import fail_fast_client
from tests.providers.wire import OPENAI

NOW = 1000.0
PRIMARY = "anthropic-us-east"
OTHER = "openai-us"
HELD = HeldLease(route=PRIMARY, id="ctx", until=NOW + 20)


async def _held(leases: MemoryInFlight) -> None:
    await leases.start(HELD.route, HELD.id, now=NOW, until=HELD.until)


async def test_the_first_try_on_its_route_holds_it() -> None:
    leases = MemoryInFlight()
    await _held(leases)
    attempt = AttemptLeases(leases, PRIMARY, HELD, first_try=True)
    lease = attempt.take(NOW + 1, HELD.until - NOW - 1 - LEASE_GRACE_S)
    assert lease.id == HELD.id and await lease.taken()
    assert await leases.count(PRIMARY, NOW + 1) == 1
    assert await attempt.ends() == [LeaseEnd(PRIMARY, HELD.id)]


@pytest.mark.parametrize(
    ("route", "first_try", "late_s"),
    [(OTHER, True, 0.0), (PRIMARY, False, 0.0), (PRIMARY, True, 0.5)],
    ids=["another-route", "a-retry", "too-late-to-cover"],
)
async def test_any_other_attempt_takes_its_own_and_gives_both_back(
    route: str, first_try: bool, late_s: float
) -> None:
    """Another route, Temporal's retry (its first try gave the lease back) or a start too
    late for the lease to cover the timeout plus the grace: a lease of its own, and the
    role context's given back with it (after an answer, or without one)."""
    leases = MemoryInFlight()
    await _held(leases)
    attempt = AttemptLeases(leases, route, HELD, first_try=first_try)
    lease = attempt.take(NOW + 1 + late_s, HELD.until - NOW - 1 - LEASE_GRACE_S)
    assert lease.id != HELD.id and await lease.taken()
    assert await attempt.ends() == [LeaseEnd(route, lease.id), LeaseEnd(PRIMARY, HELD.id)]
    attempt.release_soon()
    await asyncio.sleep(0.01)
    assert await leases.count(PRIMARY, NOW + 2) == 0 and await leases.count(OTHER, NOW + 2) == 0


def _acts(http: httpx.AsyncClient) -> LLMActivitySet:
    policy = load_policy(DEFAULT_POLICY_PATH, env={})
    return LLMActivitySet(
        policy, http, MemoryHealthStore(), MemoryResponseCache(), task_queue_for=lambda r: "q"
    )


def _call(route: str, lease: HeldLease | None) -> CallModelInput:
    return CallModelInput(
        role="analyst",
        route=route,
        lease=lease,
        request=ChatRequest(messages=[Message(role="user", content="hi")]),
        ttft_budget_ms=5000,
        idle_budget_ms=5000,
        timeout_ms=5000,
        now=NOW,
    )


def _ok(_: httpx.Request) -> httpx.Response:
    body = b"".join(OPENAI.ok_stream(["ok"]))
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


async def test_an_answer_on_another_route_gives_the_role_contexts_lease_back() -> None:
    """The plan went elsewhere (the primary skipped): the attempt there answers and gives
    back both its lease and the one its role context took on the primary."""
    async with httpx.AsyncClient(transport=httpx.MockTransport(_ok)) as http:
        acts = _acts(http)
        ctx = await acts.context.role_context(RoleContextInput(role="analyst", now=NOW, lease=True))
        assert ctx.lease is not None and ctx.lease.route == PRIMARY
        leases = acts.deps.health.in_flight
        assert await leases.count(PRIMARY, NOW + 1) == 1
        await acts.calls.call_model(_call(OTHER, ctx.lease))
        assert await leases.count(PRIMARY, NOW + 1) == 0
        assert await leases.count(OTHER, NOW + 1) == 0


async def test_a_refused_attempt_gives_the_role_contexts_lease_back() -> None:
    """A breaker that refuses the attempt on the lease's route: no call follows there, so
    the lease goes back at once (it does not wait out its ``until``)."""
    async with httpx.AsyncClient(transport=httpx.MockTransport(_ok)) as http:
        acts = _acts(http)
        health = acts.deps.health
        assert isinstance(health, MemoryHealthStore)
        ctx = await acts.context.role_context(RoleContextInput(role="analyst", now=NOW, lease=True))
        await health.force(PRIMARY, BreakerState.FORCED_OPEN, NOW)
        with pytest.raises(ApplicationError) as info:
            await acts.calls.call_model(_call(PRIMARY, ctx.lease))
        assert info.value.type == BREAKER_REJECTED
        await asyncio.sleep(0.01)  # the release runs as a task of its own
        assert await health.in_flight.count(PRIMARY, NOW + 1) == 0


async def test_a_role_context_read_from_the_local_view_hands_no_lease_on(
    embedded_redis: EmbeddedRedis,
) -> None:
    """Redis lost: the snapshot is the local view's and so is the lease taken with it,
    which the other workers never see; the context hands none to the attempt (which takes
    its own, in Redis once it is back) and the local one lapses."""
    health = RedisHealthStore(fail_fast_client(embedded_redis.url), namespace="held")
    async with httpx.AsyncClient(transport=httpx.MockTransport(_ok)) as http:
        policy = load_policy(DEFAULT_POLICY_PATH, env={})
        acts = LLMActivitySet(
            policy, http, health, MemoryResponseCache(), task_queue_for=lambda r: "q"
        )
        try:
            healthy = await acts.context.role_context(
                RoleContextInput(role="analyst", now=NOW, lease=True)
            )
            assert healthy.lease is not None and not healthy.snapshot.store_degraded
            await asyncio.to_thread(embedded_redis.kill)
            ctx = await acts.context.role_context(
                RoleContextInput(role="analyst", now=NOW + 1, lease=True)
            )
            assert ctx.snapshot.store_degraded and ctx.lease is None
            assert await health.in_flight.count(PRIMARY, NOW + 2) == 1  # the local one
        finally:
            await health.close()
