"""The response cache contract, run against the in-memory cache and against real Redis."""

from __future__ import annotations

import pytest

from agent_failover.stores.cache import CachedEntry, ResponseCache

T0 = 1_700_000_000.0


def entry(content: str = "answer", at: float = T0) -> CachedEntry:
    """A planner answer with structured data, stored at ``at``."""
    return CachedEntry(
        role="planner",
        content=content,
        data={"subtasks": [{"id": 1, "title": "x"}]},
        model="claude-sonnet-4-5",
        route="anthropic-us-east",
        stored_at=at,
    )


async def test_miss_returns_none(cache: ResponseCache) -> None:
    """An unknown key is a miss, not an error."""
    assert await cache.get("nope", now=T0) is None


async def test_round_trip(cache: ResponseCache) -> None:
    """What was put comes back equal, structured data included."""
    e = entry()
    await cache.put("k1", e, keep_s=60)
    got = await cache.get("k1", now=T0 + 1)
    assert got == e and got is not None and got.age(T0 + 1) == pytest.approx(1.0)


async def test_expiry_follows_callers_clock(cache: ResponseCache) -> None:
    """An entry expires at stored_at + keep_s as judged by the caller's ``now``."""
    await cache.put("k1", entry(), keep_s=10)
    assert await cache.get("k1", now=T0 + 9.9) is not None
    assert await cache.get("k1", now=T0 + 10) is None


async def test_put_overwrites(cache: ResponseCache) -> None:
    """A second put under the same key replaces the first."""
    await cache.put("k1", entry("old"), keep_s=60)
    await cache.put("k1", entry("new", T0 + 5), keep_s=60)
    got = await cache.get("k1", now=T0 + 6)
    assert got is not None and got.content == "new" and got.age(T0 + 6) == pytest.approx(1.0)


async def test_entry_is_kept_for_its_whole_keep_time(cache: ResponseCache) -> None:
    """The store keeps an answer for the keep time it was given, however old the answer
    gets inside it: a stale answer three hours old is still there when kept for a day."""
    await cache.put("k1", entry(), keep_s=86_400)
    got = await cache.get("k1", now=T0 + 3 * 3600)
    assert got is not None and got.age(T0 + 3 * 3600) == pytest.approx(3 * 3600)
    assert await cache.get("k1", now=T0 + 86_400) is None


async def test_rejects_bad_ttl(cache: ResponseCache) -> None:
    """A non-positive keep time is a caller bug and raises instead of caching forever."""
    with pytest.raises(ValueError):
        await cache.put("k1", entry(), keep_s=0)


async def test_status_healthy(cache: ResponseCache) -> None:
    """A cache with a reachable backend reports healthy."""
    assert (await cache.status()).healthy
