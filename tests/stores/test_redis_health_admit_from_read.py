"""Admission from this process's fresh breaker read (stores/redis_health.py): no round
trip for a route read CLOSED within ``admit_from_read_s``; a breaker another worker opened
after the read admits calls here only until the read is that old."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState
from agent_failover.stores.health import RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from tests.stores.conftest import FakeClock, _delete_namespace
from tests.stores.test_redis_reads import Sent

T0 = 1_700_000_000.0
ROUTE = "openai-us"
SETTINGS = BreakerSettings()


@dataclass
class Two:
    mine: RedisHealthStore
    other: RedisHealthStore
    clock: FakeClock


@pytest.fixture
async def two(redis_url: str, namespace: str) -> AsyncIterator[Two]:
    """This worker's store (a settable read clock) and another worker's, one namespace."""
    clock = FakeClock(start=100.0)
    mine = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace, read_clock=clock)
    other = RedisHealthStore(fail_fast_client(redis_url), namespace=namespace)
    try:
        yield Two(mine, other, clock)
    finally:
        await mine.close()
        await other.close()
        await _delete_namespace(redis_url, namespace)


async def _read(store: RedisHealthStore) -> None:
    await store.snapshot([ROUTE], now=T0, window_s=60.0, min_calls=5, role="plain")


async def test_a_fresh_closed_read_admits_without_a_round_trip(
    two: Two, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = two.mine
    await _read(mine)
    sent = Sent(monkeypatch)
    admission = await mine.admit(ROUTE, SETTINGS, T0)
    assert admission.permitted and admission.state is BreakerState.CLOSED
    assert sent.count == 0


async def test_a_breaker_opened_elsewhere_admits_only_for_the_read_s_age(
    two: Two, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window: another worker forces the route open after this one's read; calls are
    admitted here until the read is ``admit_from_read_s`` old, then the store refuses."""
    mine, other, clock = two.mine, two.other, two.clock
    await _read(mine)
    await other.force(ROUTE, BreakerState.FORCED_OPEN, T0)
    clock.advance(mine.admit_from_read_s)
    assert (await mine.admit(ROUTE, SETTINGS, T0)).permitted
    clock.advance(0.01)
    sent = Sent(monkeypatch)
    refused = await mine.admit(ROUTE, SETTINGS, T0)
    assert not refused.permitted and refused.state is BreakerState.FORCED_OPEN
    assert sent.count == 1


async def test_this_workers_own_opening_is_seen_at_once(
    two: Two,
) -> None:
    """A breaker this process opens replaces its closed read: the next call is refused."""
    mine = two.mine
    await _read(mine)
    await mine.force(ROUTE, BreakerState.FORCED_OPEN, T0)
    assert not (await mine.admit(ROUTE, SETTINGS, T0)).permitted


async def test_probes_and_a_zero_bound_ask_the_store(
    two: Two, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = two.mine
    await _read(mine)
    sent = Sent(monkeypatch)
    assert (await mine.admit(ROUTE, SETTINGS, T0, probe=True)).permitted
    mine.admit_from_read_s = 0.0
    two.clock.advance(0.001)
    assert (await mine.admit(ROUTE, SETTINGS, T0)).permitted
    assert sent.count == 2
