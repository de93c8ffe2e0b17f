"""``first_call``: a call's role context read and, when its first attempt is plain, that
attempt run, in one activity (issue 24), over a real Redis and a provider on the
Anthropic Messages streaming wire (https://docs.anthropic.com/en/api/messages-streaming,
via ``tests.providers.wire``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta

import httpx
import pytest
import yaml
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agent_failover.activities.first_models import (
    SAME_ROUTE_BACKOFF_S,
    FirstCallInput,
    FirstCallResult,
    context_detail,
)
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import parse_policy
from agent_failover.resilience.cachekey import cache_key
from agent_failover.resilience.first_attempt import role_request
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.stores.cache import RedisResponseCache
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from tests.providers.wire import ANTHROPIC
from tests.stores.conftest import _delete_namespace
from tests.stores.test_redis_reads import Sent

T0 = 1_700_000_000.0
ROLE = "critic"  # no hedging in the demo policy: a healthy first attempt is plain
ROUTE = "anthropic-us-east"  # its primary
QUEUE = "wf-queue"
REQUEST = ChatRequest(messages=[Message(role="user", content="review")], max_tokens=64)


@dataclass
class Provider:
    """The provider's side: what it was sent, and how it answers."""

    answer: Callable[[httpx.Request], httpx.Response]
    seen: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        return self.answer(request)


def ok(_: httpx.Request) -> httpx.Response:
    body = b"".join(ANTHROPIC.ok_stream(['{"verdict": "approve", "reasons": []}']))
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def status(code: int, kind: str) -> Callable[[httpx.Request], httpx.Response]:
    """An Anthropic error body (https://docs.anthropic.com/en/api/errors)."""

    def answer(_: httpx.Request) -> httpx.Response:
        body = {"type": "error", "error": {"type": kind, "message": kind}}
        return httpx.Response(code, json=body)

    return answer


@dataclass
class Worker:
    acts: LLMActivitySet
    provider: Provider
    health: RedisHealthStore
    cache: RedisResponseCache


@pytest.fixture
async def worker(redis_url: str, namespace: str) -> AsyncIterator[Worker]:
    """A worker serving the role's attempts on the workflow's own queue (eager dispatch)."""
    policy = parse_policy(yaml.safe_load(DEFAULT_POLICY_PATH.read_text()), env={})
    health = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    cache = RedisResponseCache(fail_fast_client(redis_url), namespace=namespace)
    provider = Provider(ok)
    http = httpx.AsyncClient(transport=httpx.MockTransport(provider))
    acts = LLMActivitySet(policy, http, health, cache, task_queue_for=lambda r: QUEUE)
    try:
        yield Worker(acts, provider, health, cache)
    finally:
        await health.close()
        await cache.close()
        await http.aclose()
        await _delete_namespace(redis_url, namespace)


def _input(now: float = T0, queue: str = QUEUE) -> FirstCallInput:
    return FirstCallInput(role=ROLE, request=REQUEST, ticket=0.5, now=now, workflow_queue=queue)


async def test_a_plain_first_attempt_runs_with_the_context_it_was_planned_from(
    worker: Worker,
) -> None:
    """The role's primary answers; the result carries the context (its lease on that
    route, which the attempt held and gave back), the route and the answer, and the
    provider got the role's prompt; the full answer is cached under the call's key."""
    out = await worker.acts.first.first_call(_input())
    assert out.route == ROUTE and out.tier == 0 and out.planned_at == T0
    assert out.result is not None and out.result.data == {"verdict": "approve", "reasons": []}
    assert out.context.lease is not None and out.context.lease.route == ROUTE
    (sent,) = worker.provider.seen
    critic = worker.acts.deps.policy.role(ROLE)
    assert critic.system_prompt and critic.system_prompt in json.loads(sent.content)["system"]
    key = cache_key(ROLE, role_request(REQUEST, critic))
    assert (await worker.cache.get(key, now=T0 + 1)) is not None
    assert await worker.health.in_flight.count(ROUTE, T0 + 1) == 0


async def test_a_healthy_call_costs_two_redis_round_trips(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot with the lease's take (1), then the record with the cache write and the
    lease's end (1): the local activity's read and the attempt's, now in one activity."""
    await worker.acts.first.first_call(_input())  # connections and scripts set up
    sent = Sent(monkeypatch)
    for i in range(3):
        await worker.acts.first.first_call(_input(T0 + 1 + i))
    assert sent.count <= 2 * 3


async def test_attempts_on_another_queue_are_left_to_the_workflow(worker: Worker) -> None:
    """The role's attempts go to another queue than the workflow's: the context only (with
    the lease for the attempt the workflow schedules there), and no provider call."""
    out = await worker.acts.first.first_call(_input(queue="another-workflow-queue"))
    assert out.route is None and out.result is None and not worker.provider.seen
    assert out.context.lease is not None and out.context.lease.route == ROUTE


async def test_a_full_bulkhead_leaves_the_attempt_to_its_queue(worker: Worker) -> None:
    """Eager dispatch with the role's bulkhead full on this worker: the context only (the
    workflow sends the attempt to the bulkhead's queue, where it waits for a slot)."""
    gate = asyncio.Semaphore(1)
    await gate.acquire()
    bulkhead = worker.acts.deps.policy.role(ROLE).bulkhead
    worker.acts.deps.gates[bulkhead] = gate
    out = await worker.acts.first.first_call(_input())
    assert out.route is None and not worker.provider.seen


@pytest.mark.parametrize(
    ("answer", "error_type", "retry_in_s"),
    [
        (status(529, "overloaded_error"), "overloaded", None),
        (status(500, "api_error"), "server_error", SAME_ROUTE_BACKOFF_S),
    ],
    ids=["overloaded", "server-error"],
)
async def test_a_failed_attempt_raises_with_its_context(
    worker: Worker, answer: Callable, error_type: str, retry_in_s: float | None
) -> None:
    """The attempt's error, typed as ``call_model``'s, not retried by Temporal, with the
    context, route and tier as its second detail and when ``call_model`` would have been
    retried on the route (a 500: after the backoff) as ``retry_in_s``."""
    worker.provider.answer = answer
    with pytest.raises(ApplicationError) as info:
        await worker.acts.first.first_call(_input())
    err = info.value
    assert err.type == error_type and err.non_retryable
    assert err.details[0]["route"] == ROUTE and err.details[0]["error_class"] == error_type
    got = context_detail(err.details)
    assert isinstance(got, FirstCallResult)
    assert got.route == ROUTE and got.result is None and got.retry_in_s == retry_in_s
    assert got.context.role.name == ROLE and got.planned_at == T0


def test_no_context_detail_in_an_error_without_one() -> None:
    assert context_detail([{"route": ROUTE}]) is None
    assert context_detail([]) is None


async def test_a_retried_try_reads_afresh_and_leaves_the_attempt_to_the_workflow(
    worker: Worker,
) -> None:
    """Temporal retries ``first_call`` only when a try was lost: the next try returns the
    context (taking no lease nothing would carry) and calls no provider."""
    env = ActivityEnvironment()
    env.info = env.info.__class__(**{**env.info.__dict__, "attempt": 2})
    out = await env.run(worker.acts.first.first_call, _input())
    assert out.tries == 2 and out.route is None and out.context.lease is None
    assert not worker.provider.seen


async def test_an_activity_timeout_shorter_than_the_attempt_leaves_it_to_the_workflow(
    worker: Worker,
) -> None:
    env = ActivityEnvironment()
    short = timedelta(milliseconds=10)
    env.info = env.info.__class__(**{**env.info.__dict__, "start_to_close_timeout": short})
    out = await env.run(worker.acts.first.first_call, _input())
    assert out.route is None and not worker.provider.seen
