"""`cache_lookup` answers with a value either way: a hit with its answer, or an explicit
miss saying why."""

from __future__ import annotations

import httpx
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_failover.activities.cache import CacheActivities
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import CachedAnswer, CacheLookupInput, CacheLookupResult
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.stores.cache import CachedEntry, MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore

T0 = 1_000_000.0


def _acts(cache: MemoryResponseCache) -> CacheActivities:
    policy = load_policy(DEFAULT_POLICY_PATH, env={"SIM_URL": "http://sim.test"})
    return LLMActivitySet(
        policy,
        httpx.AsyncClient(),
        MemoryHealthStore(),
        cache,
        task_queue_for=lambda role: "q",
    ).cache


async def test_no_entry_is_an_explicit_miss() -> None:
    """Nothing stored: hit false with the reason, not a null payload."""
    res = await _acts(MemoryResponseCache()).cache_lookup(
        CacheLookupInput(key="k", now=T0, ttl_s=30, max_staleness_s=60)
    )
    assert res == CacheLookupResult(hit=False, miss_reason="no entry")
    payload = pydantic_data_converter.payload_converter.to_payload(res)
    assert payload.metadata["encoding"] != b"binary/null"


async def test_too_old_is_a_miss_with_ages() -> None:
    """An entry older than the staleness budget is a miss that says how old it is."""
    cache = MemoryResponseCache()
    await cache.put("k", CachedEntry(role="r", content="old", stored_at=T0), keep_s=10_000)
    res = await _acts(cache).cache_lookup(
        CacheLookupInput(key="k", now=T0 + 500, ttl_s=50, max_staleness_s=100)
    )
    assert not res.hit and res.answer is None
    assert res.miss_reason == "too old: 500s old >= 100s allowed"


async def test_fresh_entry_is_a_hit_with_its_age() -> None:
    cache = MemoryResponseCache()
    await cache.put("k", CachedEntry(role="r", content="good", stored_at=T0), keep_s=10_000)
    res = await _acts(cache).cache_lookup(
        CacheLookupInput(key="k", now=T0 + 30, ttl_s=40, max_staleness_s=60)
    )
    assert res.hit and res.answer is not None
    assert res.answer.content == "good" and res.answer.age_s == 30 and res.answer.fresh


async def test_entry_past_its_ttl_is_a_stale_hit() -> None:
    """Older than ttl_s but younger than max_staleness_s: served, marked not fresh."""
    cache = MemoryResponseCache()
    await cache.put("k", CachedEntry(role="r", content="old", stored_at=T0), keep_s=100)
    res = await _acts(cache).cache_lookup(
        CacheLookupInput(key="k", now=T0 + 41, ttl_s=40, max_staleness_s=100)
    )
    assert res.hit and res.answer is not None and not res.answer.fresh


def test_a_hit_round_trips_through_history() -> None:
    """A hit and its answer decode back from their payload as written."""
    hit = CacheLookupResult(hit=True, answer=CachedAnswer(content="c", age_s=3.0))
    payload = pydantic_data_converter.payload_converter.to_payload(hit)
    res = pydantic_data_converter.payload_converter.from_payload(payload, CacheLookupResult)
    assert res == hit
