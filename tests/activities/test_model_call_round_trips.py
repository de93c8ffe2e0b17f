"""Redis round trips of one healthy call (issue 24): the role context's snapshot, with the
call's in-flight lease on its first route taken in the same pipeline, then ``call_model``
admitted from that fresh read and holding that lease, and its outcome record, cache write
and the lease's end in one pipeline: two. A route whose breaker is not closed still asks
the store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
import yaml
from temporalio.exceptions import ApplicationError

from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import (
    CacheWrite,
    CallModelInput,
    HeldLease,
    RoleContextInput,
)
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import parse_policy
from agent_failover.resilience.breaker import Breaker
from agent_failover.resilience.cachekey import cache_key
from agent_failover.resilience.contracts import BreakerState
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.outcomes import BREAKER_REJECTED
from agent_failover.stores.cache import RedisResponseCache
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from tests.providers.wire import ANTHROPIC
from tests.stores.conftest import _delete_namespace
from tests.stores.test_redis_reads import Sent

T0 = 1_700_000_000.0
ROLE = "analyst"
ROUTE = "anthropic-us-east"  # the analyst's primary (its first roster route)
REQUEST = ChatRequest(messages=[Message(role="user", content="hi")], max_tokens=64)


def _reply(_: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=b"".join(ANTHROPIC.ok_stream(["ok"])),
    )


@dataclass
class Worker:
    acts: LLMActivitySet
    health: RedisHealthStore
    cache: RedisResponseCache


@pytest.fixture
async def worker(redis_url: str, namespace: str) -> AsyncIterator[Worker]:
    """One worker whose health store and response cache share one Redis (own clients)."""
    policy = parse_policy(yaml.safe_load(DEFAULT_POLICY_PATH.read_text()), env={})
    assert not policy.rate_budgets.endpoints and not policy.rate_budgets.bulkheads
    health = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    cache = RedisResponseCache(fail_fast_client(redis_url), namespace=namespace)
    http = httpx.AsyncClient(transport=httpx.MockTransport(_reply))
    acts = LLMActivitySet(policy, http, health, cache, task_queue_for=lambda r: "q")
    try:
        yield Worker(acts, health, cache)
    finally:
        await health.close()
        await cache.close()
        await http.aclose()
        await _delete_namespace(redis_url, namespace)


def _call(route: str, now: float, lease: HeldLease | None = None) -> CallModelInput:
    return CallModelInput(
        role=ROLE,
        route=route,
        request=REQUEST,
        ttft_budget_ms=2000,
        idle_budget_ms=2000,
        timeout_ms=5000,
        now=now,
        cache=CacheWrite(key=cache_key(ROLE, REQUEST), keep_s=600.0),
        lease=lease,
    )


async def _one_call(w: Worker, now: float) -> str:
    """What a resilient call does on its healthy path: role context (asked for the call's
    lease, as the workflow asks), then one attempt carrying that lease."""
    ctx = await w.acts.context.role_context(RoleContextInput(role=ROLE, now=now, lease=True))
    await w.acts.calls.call_model(_call(ROUTE, now, ctx.lease))
    return ROUTE


async def test_a_healthy_call_costs_at_most_two_round_trips(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshot and the in-flight lease's take (1) + record, cache write and the lease's
    end (1); admission rides on the snapshot, the attempt holds the lease taken with it."""
    route = await _one_call(worker, T0)  # connections and scripts set up
    sent = Sent(monkeypatch)
    for i in range(3):
        await _one_call(worker, T0 + 1 + i)
    assert sent.count <= 2 * 3
    cached = await worker.cache.get(cache_key(ROLE, REQUEST), now=T0 + 4)
    assert cached is not None and cached.route == route
    assert (await worker.health.breaker(route)).state is BreakerState.CLOSED
    assert await worker.health.in_flight.count(route, T0 + 4) == 0  # every lease given back


def _breaker(route: str, state: BreakerState) -> Breaker:
    """A breaker another worker left in ``state`` (open until well after the call)."""
    open_until = T0 + 600 if state is BreakerState.OPEN else None
    return Breaker(route=route, state=state, since=T0, open_until=open_until, version=7)


@pytest.mark.parametrize(
    "state", [BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.FORCED_OPEN]
)
async def test_a_route_not_closed_asks_the_store(
    worker: Worker, redis_url: str, monkeypatch: pytest.MonkeyPatch, state: BreakerState
) -> None:
    """After a fresh snapshot that read the route not closed, admission is the store's: a
    round trip, its refusal, or a half-open trial holding a lease."""
    route = await _one_call(worker, T0)
    other = fail_fast_client(redis_url)
    try:
        b = _breaker(route, state)
        mapping = {"v": b.version, "b": b.model_dump_json()}
        await other.hset(worker.health.breaker_key(route), mapping=mapping)
    finally:
        await other.aclose()
    await worker.acts.context.role_context(RoleContextInput(role=ROLE, now=T0 + 2))
    sent = Sent(monkeypatch)
    if state is BreakerState.HALF_OPEN:
        result = await worker.acts.calls.call_model(_call(route, T0 + 2))
        assert result.trial
        assert sent.count >= 3  # admission's read and lease, then the record
        return
    with pytest.raises(ApplicationError) as info:
        await worker.acts.calls.call_model(_call(route, T0 + 2))
    assert info.value.type == BREAKER_REJECTED
    assert sent.count == 1  # the store's admission, and nothing after the refusal
