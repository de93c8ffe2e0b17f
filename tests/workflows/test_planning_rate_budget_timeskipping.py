"""A route out of its shared rate budget is planned around like a cooling route, and comes
back when its bucket refilled (workflow time on the time-skipping server); two workers
(each its own task queue, its own Redis clients, one key namespace) share the budget."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig, RateBudget, RateBudgets
from agent_failover.resilience.contracts import ReasonCode
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from agent_failover.testing.sim.admin import SimAdmin
from tests.stores.conftest import _delete_namespace, redis_url  # noqa: F401  (fixture)
from tests.workflows.conftest import Harness, make_harness, running

PRIMARY = "anthropic-us-east"


@pytest.fixture
async def two_workers(
    request: pytest.FixtureRequest, ts_env: WorkflowEnvironment, policy: PolicyConfig
) -> AsyncIterator[list[Harness]]:
    """Two workers, each its own task queue and Redis clients, one key namespace; the
    primary may start one request a minute."""
    url = request.getfixturevalue("redis_url")
    budgets = RateBudgets(endpoints={PRIMARY: RateBudget(requests_per_minute=1)})
    p = policy.model_copy(update={"rate_budgets": budgets})
    ns = f"test-budget-{uuid.uuid4().hex[:10]}"
    stores = [
        (RedisHealthStore(fail_fast_client(url), namespace=ns), MemoryResponseCache())
        for _ in range(2)
    ]
    a, workers = await make_harness(ts_env.client, p, health=stores[0][0], cache=stores[0][1])
    b, more = await make_harness(ts_env.client, p, health=stores[1][0], cache=stores[1][1])
    try:
        async with running([*workers, *more]):
            yield [a, b]
    finally:
        for health, _ in stores:
            await health.close()
        await _delete_namespace(url, ns)


async def test_out_of_budget_primary_fails_over_then_returns(
    ts_env: WorkflowEnvironment, two_workers: list[Harness], sim_admin: SimAdmin
) -> None:
    """One request a minute on the primary: worker A's call takes it, worker B's call is
    answered by the standby with RATE_BUDGET (the primary not called again), and a minute
    later the primary answers B."""
    a, b = two_workers
    first = await a.call(env=ts_env)
    assert (first.route, first.tier) == (PRIMARY, 0)
    second = await b.call(env=ts_env)
    assert second.route != PRIMARY and second.tier == 1
    assert ReasonCode.RATE_BUDGET in second.reason_codes
    assert [a.route for a in second.attempts if a.outcome != "skipped"] == [second.route]
    calls = await sim_admin.attempts(endpoint=PRIMARY)
    assert len(calls) == 1
    await ts_env.sleep(61)
    third = await b.call(env=ts_env)
    assert (third.route, third.tier) == (PRIMARY, 0)
    assert ReasonCode.RATE_BUDGET not in third.reason_codes
