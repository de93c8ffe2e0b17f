"""The Redis response cache with the payload codec: what Redis holds is ciphertext, older
clear entries still serve, and an entry nobody can open is a logged miss, never a crash."""

from __future__ import annotations

import logging

import pytest

from agent_failover.stores.cache import SEALED_PREFIX, CachedEntry, RedisResponseCache
from tests.stores.conftest import sealing_codec

T0 = 1_700_000_000.0
SECRET = "quarterly numbers nobody outside may read"


def entry(content: str = SECRET) -> CachedEntry:
    return CachedEntry(role="critic", content=content, data={"note": content}, stored_at=T0)


async def test_redis_holds_ciphertext_and_the_codec_reads_it(redis_client, namespace) -> None:
    """The stored value is sealed (no plaintext, the key id visible); get returns the entry."""
    cache = RedisResponseCache(redis_client, namespace=namespace, codec=sealing_codec())
    await cache.put("k", entry(), keep_s=60)
    raw = await redis_client.get(f"{namespace}:cache:k")
    assert raw.startswith(SEALED_PREFIX) and SECRET.encode() not in raw
    assert b"cache-k1" in raw and 0 < await redis_client.pttl(f"{namespace}:cache:k") <= 60_000
    got = await cache.get("k", now=T0 + 1)
    assert got == entry()
    assert await cache.get("k", now=T0 + 61) is None  # the caller's clock still applies


async def test_clear_entries_from_before_the_codec_still_serve(redis_client, namespace) -> None:
    """Turning the codec on does not throw away the answers cached before."""
    await RedisResponseCache(redis_client, namespace=namespace).put("k", entry(), keep_s=60)
    sealed = RedisResponseCache(redis_client, namespace=namespace, codec=sealing_codec())
    assert await sealed.get("k", now=T0) == entry()


@pytest.mark.parametrize("reader_codec", [None, "other-key"])
async def test_unreadable_entry_is_a_logged_miss(
    redis_client, namespace, caplog: pytest.LogCaptureFixture, reader_codec: str | None
) -> None:
    """A sealed entry read without a codec, or with a codec lacking its key, is a miss and a
    warning naming the entry (and the key id it needs)."""
    writer = RedisResponseCache(redis_client, namespace=namespace, codec=sealing_codec())
    await writer.put("k", entry(), keep_s=60)
    codec = sealing_codec(reader_codec) if reader_codec else None
    reader = RedisResponseCache(redis_client, namespace=namespace, codec=codec)
    with caplog.at_level(logging.WARNING, logger="agent_failover.stores.cache"):
        assert await reader.get("k", now=T0) is None
    message = caplog.text
    assert "cache entry k" in message
    assert ("no payload codec" in message) if codec is None else ("'cache-k1'" in message)
