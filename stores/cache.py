"""Response cache: the Tier 3 "cached response" fallback, in Redis or in memory.

A successful agent answer is stored under :func:`resilience.cachekey.cache_key` and kept
for ``keep_s`` seconds (the role's ``max_staleness_s``, not its freshness ``ttl_s``: a
stale answer must still be there when an outage outlasts the TTL); when every live route
fails, the workflow serves the cached answer and labels it ``CACHED_RESPONSE`` with its
age. The cache only stores and expires entries: whether an answer is fresh or stale is
the caller's decision (:func:`resilience.degrade.cache_age_verdict`), made from
``now - entry.stored_at``. Expiry is judged against the caller's ``now`` (so fake clocks
work) and, in Redis, also enforced by a key TTL so memory stays bounded.

:class:`RedisResponseCache` degrades like the health store: if Redis becomes unreachable
it serves and stores entries in a local :class:`MemoryResponseCache`, reports the outage
through :meth:`status`, and writes the entries cached meanwhile back to Redis (bounded)
once it returns.

With a payload codec (the worker's Temporal ``PayloadCodec``, e.g. the AES-GCM codec of
``agent_failover.codec``), Redis holds each entry sealed by the codec exactly like a
history payload (``enc1:`` + the encoded ``Payload``), so cached answers are no more
readable in Redis than in Temporal. Entries written before the codec was turned on are
still read; an entry the codec cannot open (its key was retired) is a miss, logged.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import redis.asyncio as aioredis
from pydantic import BaseModel, Field
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from agent_failover.stores.redis_link import DEFAULT_RECONNECT_INTERVAL_S, REDIS_DOWN, RedisLink
from agent_failover.stores.status import StoreStatus

DEFAULT_MAX_ENTRIES = 4096
DEFAULT_MAX_PENDING = 1024
DEFAULT_NAMESPACE = "failover"
#: Prefix of a Redis value sealed by the payload codec (plain entries are JSON objects).
SEALED_PREFIX = b"enc1:"

log = logging.getLogger(__name__)


class CachedEntry(BaseModel):
    """One cached agent answer and where it came from."""

    role: str
    content: str
    data: dict[str, Any] | list[Any] | None = None
    model: str | None = None
    route: str | None = None
    stored_at: float = Field(description="epoch seconds when the answer was produced")

    def age(self, now: float) -> float:
        """Seconds since the answer was stored (never negative, even with skewed clocks)."""
        return max(0.0, now - self.stored_at)


@runtime_checkable
class ResponseCache(Protocol):
    """Where Tier 3 answers come from. Implementations must be safe for concurrent use."""

    async def get(self, key: str, *, now: float) -> CachedEntry | None:
        """Return the entry under ``key`` unless it is missing or expired at ``now``."""
        ...

    async def put(self, key: str, entry: CachedEntry, *, keep_s: float) -> None:
        """Keep ``entry`` until ``entry.stored_at + keep_s``, replacing any previous one."""
        ...

    async def status(self) -> StoreStatus:
        """Report the backend's health."""
        ...

    async def close(self) -> None:
        """Release connections; the cache must not be used afterwards."""
        ...


def _px(keep_s: float) -> int:
    """``keep_s`` as a Redis ``PX`` (at least one millisecond)."""
    return max(1, math.ceil(keep_s * 1000))


def _check_keep(keep_s: float) -> None:
    if not keep_s > 0 or math.isinf(keep_s):
        raise ValueError(f"keep_s must be a positive finite number of seconds, got {keep_s!r}")


class MemoryResponseCache:
    """A bounded LRU cache in process memory.

    Holds at most ``max_entries`` entries; inserting one more evicts the least recently
    used. Expired entries are dropped when read. Single event loop, no awaits inside
    critical sections, so no lock is needed.
    """

    def __init__(self, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        """Create an empty cache holding at most ``max_entries`` entries."""
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self._items: OrderedDict[str, tuple[CachedEntry, float]] = OrderedDict()

    async def get(self, key: str, *, now: float) -> CachedEntry | None:
        """Return the entry under ``key`` unless missing or expired at ``now``."""
        item = self._items.get(key)
        if item is None:
            return None
        entry, expires_at = item
        if now >= expires_at:
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return entry

    async def put(self, key: str, entry: CachedEntry, *, keep_s: float) -> None:
        """Keep ``entry`` until ``entry.stored_at + keep_s``; evict the LRU entry if full."""
        _check_keep(keep_s)
        self._items[key] = (entry, entry.stored_at + keep_s)
        self._items.move_to_end(key)
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

    async def status(self) -> StoreStatus:
        """An in-memory cache is always healthy."""
        return StoreStatus(backend="memory", healthy=True)

    async def close(self) -> None:
        """Drop every entry."""
        self._items.clear()


class RedisResponseCache:
    """The shared cache: one Redis string per key, ``SET ... PX ttl``.

    The value is ``{"e": entry, "x": expires_at}`` so a read can apply the caller's
    clock as well as Redis's own TTL, sealed by ``codec`` when one is given. Keys are
    ``{namespace}:cache:{key}``.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        fallback_max_entries: int = DEFAULT_MAX_ENTRIES,
        max_pending: int = DEFAULT_MAX_PENDING,
        reconnect_interval_s: float = DEFAULT_RECONNECT_INTERVAL_S,
        clock: Callable[[], float] = time.time,
        codec: PayloadCodec | None = None,
    ) -> None:
        """Use ``client`` under ``namespace``; the other arguments tune the Redis-loss fallback."""
        self._r = client
        self._codec = codec
        self.namespace = namespace
        self.link = RedisLink(
            client,
            name=f"response cache [{namespace}]",
            reconnect_interval_s=reconnect_interval_s,
            clock=clock,
        )
        self._clock = clock
        self._fallback_max_entries = fallback_max_entries
        self._local = MemoryResponseCache(max_entries=fallback_max_entries)
        # (key, entry, keep_s, written_at): puts made while degraded, written back on recovery.
        self._pending: deque[tuple[str, CachedEntry, float, float]] = deque(maxlen=max_pending)
        self._dropped = 0

    def _key(self, key: str) -> str:
        return f"{self.namespace}:cache:{key}"

    async def get(self, key: str, *, now: float) -> CachedEntry | None:
        """Return the entry under ``key`` unless missing or expired at ``now``."""
        if self.link.degraded and not await self.link.recover(self._resync):
            return await self._local.get(key, now=now)
        try:
            await self.link.ready()
            raw = await self._r.get(self._key(key))
        except REDIS_DOWN as exc:
            self.link.mark_down(exc)
            return await self._local.get(key, now=now)
        if raw is None:
            return None
        doc = await self._open(key, raw)
        if doc is None or now >= doc["x"]:
            return None
        return CachedEntry.model_validate(doc["e"])

    async def put(self, key: str, entry: CachedEntry, *, keep_s: float) -> None:
        """Keep ``entry`` for ``keep_s`` seconds (locally, queued for Redis, while degraded)."""
        _check_keep(keep_s)
        if self.link.degraded and not await self.link.recover(self._resync):
            await self._put_local(key, entry, keep_s)
            return
        try:
            await self.link.ready()
            await self._write(key, entry, expires_at=entry.stored_at + keep_s, keep_s=keep_s)
        except REDIS_DOWN as exc:
            self.link.mark_down(exc)
            await self._put_local(key, entry, keep_s)

    async def _write(
        self, key: str, entry: CachedEntry, *, expires_at: float, keep_s: float
    ) -> None:
        value = await self._value(entry, expires_at)
        await self._r.set(self._key(key), value, px=_px(keep_s))

    async def _value(self, entry: CachedEntry, expires_at: float) -> bytes:
        """The stored document, sealed by the codec when there is one."""
        value = json.dumps(
            {"e": entry.model_dump(mode="json"), "x": expires_at},
            separators=(",", ":"),
        ).encode()
        if self._codec is not None:
            plain = Payload(metadata={"encoding": b"json/plain"}, data=value)
            (sealed,) = await self._codec.encode([plain])
            value = SEALED_PREFIX + sealed.SerializeToString()
        return value

    async def queued_put(self, key: str, entry: CachedEntry, *, keep_s: float) -> QueuedPut:
        """A put to ride in another store's pipeline to the same server
        (:mod:`stores.after_call`), with this cache's fallback if that round trip fails."""
        _check_keep(keep_s)
        value = await self._value(entry, entry.stored_at + keep_s)
        command = ("SET", self._key(key), value, "PX", _px(keep_s))
        return QueuedPut(self, key, entry, keep_s, command)

    async def _open(self, key: str, raw: bytes) -> dict[str, Any] | None:
        """The stored document, unsealed if the codec sealed it; None if it cannot be."""
        if not raw.startswith(SEALED_PREFIX):
            return json.loads(raw)
        if self._codec is None:
            log.warning("cache entry %s is encrypted and no payload codec is configured", key)
            return None
        try:
            (plain,) = await self._codec.decode([Payload.FromString(raw[len(SEALED_PREFIX) :])])
        except Exception as exc:  # any codec's failure: a cached answer is only a fallback
            log.warning("cache entry %s cannot be decrypted, treated as a miss: %s", key, exc)
            return None
        return json.loads(plain.data)

    async def _put_local(self, key: str, entry: CachedEntry, keep_s: float) -> None:
        await self._local.put(key, entry, keep_s=keep_s)
        if len(self._pending) == self._pending.maxlen:
            self._dropped += 1
        self._pending.append((key, entry, keep_s, self._clock()))

    async def _resync(self) -> None:
        """Write back the entries cached while Redis was away, with their remaining time."""
        while self._pending:
            key, entry, keep_s, written_at = self._pending[0]
            remaining = keep_s - (self._clock() - written_at)
            if remaining > 0:
                await self._write(key, entry, expires_at=entry.stored_at + keep_s, keep_s=remaining)
            self._pending.popleft()
        self._local = MemoryResponseCache(max_entries=self._fallback_max_entries)

    async def status(self) -> StoreStatus:
        """Report whether Redis is reachable and how many entries wait to be written back."""
        if self.link.degraded:
            await self.link.recover(self._resync)
        return self.link.status(pending=len(self._pending), dropped=self._dropped)

    async def close(self) -> None:
        """Close the Redis client's connections."""
        await self._r.aclose()


class QueuedPut:
    """One cache ``SET`` queued on another store's pipeline (the health record's).

    Its outcome is the put's: answered, it is written; the round trip lost (``REDIS_DOWN``
    raised, or returned for the command), the cache goes degraded and keeps the entry in its
    local fallback for write-back; any other error is logged, the answer stands.
    """

    def __init__(
        self,
        cache: RedisResponseCache,
        key: str,
        entry: CachedEntry,
        keep_s: float,
        command: tuple[Any, ...],
    ) -> None:
        self._cache, self._key, self._entry, self._keep_s = cache, key, entry, keep_s
        self.command = command
        self.settled = False

    async def done(self, result: Any) -> None:
        """The pipeline's reply to the ``SET``."""
        if isinstance(result, REDIS_DOWN):
            await self.failed(result)
        elif isinstance(result, Exception):
            log.warning("response cache write for role %r failed: %s", self._entry.role, result)
        self.settled = True

    async def failed(self, exc: BaseException) -> None:
        """Redis was lost before the ``SET`` was answered: keep it locally, as a put would."""
        self.settled = True
        self._cache.link.mark_down(exc)
        await self._cache._put_local(self._key, self._entry, self._keep_s)

    async def alone(self) -> None:
        """The pipeline was never sent: an ordinary put (with its own fallback)."""
        self.settled = True
        try:
            await self._cache.put(self._key, self._entry, keep_s=self._keep_s)
        except Exception as exc:  # any cache fault; cancellation is not an Exception
            log.warning("response cache write for role %r failed: %s", self._entry.role, exc)
