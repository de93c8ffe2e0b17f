"""The Redis-or-local helper: Redis when it answers, else the local view, queueing writes
for replay only when the local view accepted them (an outcome: always)."""

from __future__ import annotations

import pytest
import redis

from agent_failover.resilience.breaker import IllegalTransition
from agent_failover.resilience.contracts import BreakerState
from agent_failover.stores.memory_health import MemoryHealthStore
from agent_failover.stores.redis_context import SeenState
from agent_failover.stores.redis_fallback import PendingForce, RedisFallback
from agent_failover.stores.redis_link import RedisLink, fail_fast_client

ROUTE = "openai-us"


def fallback(clock) -> RedisFallback:
    """A fallback over a Redis that never answers, reconnecting at most every 60 s."""
    link = RedisLink(
        fail_fast_client("redis://127.0.0.1:1/0"),
        name="test",
        reconnect_interval_s=60.0,
        clock=clock,
    )

    async def nothing(_: object) -> None:
        return None

    return RedisFallback(
        link,
        SeenState(),
        max_pending=8,
        horizon_s=600.0,
        baseline_refresh_s=30.0,
        restore=nothing,
        replay=nothing,
    )


async def _down() -> None:
    raise redis.ConnectionError("refused")


async def test_redis_down_serves_locally_and_queues(fake_clock) -> None:
    """The first Redis error marks one outage; the write is applied locally and queued."""
    fb = fallback(fake_clock)
    op = PendingForce(ROUTE, BreakerState.FORCED_OPEN, 1.0)

    async def force(local: MemoryHealthStore):
        return await local.force(ROUTE, BreakerState.FORCED_OPEN, 1.0)

    await fb.run(_down, force, replay=op)
    status = await fb.status()
    assert not status.healthy and status.pending_sync == 1
    assert "ConnectionError" in (status.last_error or "")


async def test_a_move_the_local_view_rejects_is_not_queued(fake_clock) -> None:
    """A forced move the local view refuses raises and leaves nothing to replay."""
    fb = fallback(fake_clock)

    async def release(local: MemoryHealthStore):
        return await local.force(ROUTE, BreakerState.CLOSED, 1.0)

    with pytest.raises(IllegalTransition):
        await fb.run(_down, release, replay=PendingForce(ROUTE, BreakerState.CLOSED, 1.0))
    assert (await fb.status()).pending_sync == 0


async def test_replay_first_queues_even_if_the_local_call_fails(fake_clock) -> None:
    """With ``replay_first`` the write is queued before the local view runs it."""
    fb = fallback(fake_clock)

    async def boom(local: MemoryHealthStore):
        raise RuntimeError("local failure")

    with pytest.raises(RuntimeError):
        await fb.run(_down, boom, replay=PendingForce(ROUTE, None, 1.0), replay_first=True)
    assert (await fb.status()).pending_sync == 1
