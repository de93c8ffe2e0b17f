"""Round trips of a health snapshot read from Redis (stores/redis_reads.py)."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection

from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.in_flight import LeaseTake
from agent_failover.stores.redis_link import fail_fast_client

T0 = 1_700_000_000.0
ROUTES = ["openai-us", "anthropic-us-east"]


class Sent:
    """Counts what redis-py writes to the server: one write is one round trip."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        orig = AbstractConnection.send_packed_command

        async def counted(conn: Any, command: Any, check_health: bool = True) -> None:
            self.count += 1
            await orig(conn, command, check_health)

        monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)


async def _snapshot(store: RedisHealthStore) -> Any:
    return await store.snapshot(ROUTES, now=T0, window_s=60.0, min_calls=5, role="plain")


async def test_a_snapshot_is_one_round_trip(
    redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every route and the role's verdicts in one pipeline, without a SCRIPT EXISTS first."""
    store = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    try:
        await _snapshot(store)  # connection set-up and script load out of the way
        sent = Sent(monkeypatch)
        for _ in range(3):
            await _snapshot(store)
        assert sent.count == 3
    finally:
        await store.close()


async def test_a_flushed_script_is_loaded_again(
    redis_url: str, namespace: str, redis_client: Any
) -> None:
    """A server that lost its scripts (restart, SCRIPT FLUSH) is read after one reload."""
    store = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    try:
        first = await _snapshot(store)
        await redis_client.script_flush()
        again = await _snapshot(store)
        assert again.store_degraded is first.store_degraded is False
        assert set(again.routes) == set(first.routes)
    finally:
        await store.close()


async def test_a_snapshot_with_a_lease_is_one_round_trip_and_survives_a_flush(
    redis_url: str, namespace: str, redis_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The role context's lease rides in the snapshot's pipeline (no round trip of its
    own, no SCRIPT EXISTS), and a server that lost the take's script loads it again."""
    store = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    try:
        await _snapshot(store)
        await redis_client.script_flush()
        snap = await store.snapshot(
            ROUTES, now=T0, window_s=60.0, min_calls=5, role="plain", lease=_take("a")
        )
        assert not snap.store_degraded
        sent = Sent(monkeypatch)
        for lease in ("b", "c"):
            await store.snapshot(
                ROUTES, now=T0, window_s=60.0, min_calls=5, role="plain", lease=_take(lease)
            )
        assert sent.count == 2
        assert await store.in_flight.count(ROUTES[0], T0 + 1) == 3
    finally:
        await store.close()


def _take(lease: str) -> LeaseTake:
    return LeaseTake(ROUTES[0], lease, T0 + 30)
