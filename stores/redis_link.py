"""Redis connectivity bookkeeping shared by the Redis-backed stores.

A :class:`RedisLink` wraps one ``redis.asyncio.Redis`` client and remembers whether the
server is reachable. Stores call Redis inside ``try``/``except REDIS_DOWN``; on failure
they call :meth:`RedisLink.mark_down` and serve from a local fallback, and on every later
call they ask :meth:`RedisLink.recover` whether it is time to try again. The link logs one
warning per outage (not one per call, which would flood logs at request rate), probes at
most every ``reconnect_interval_s`` seconds, and runs the store's resync callback under a
lock so concurrent callers never replay the same backlog twice. :func:`fail_fast_client`
builds a client whose calls fail in well under a second when the server is gone, instead
of redis-py's default of retrying with exponential backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_failover.stores.status import StoreStatus
from agent_failover.telemetry import record

log = logging.getLogger(__name__)

#: Errors that mean "the server is not there right now", as opposed to a bug in a command.
#: redis-py wraps socket failures in its own ConnectionError/TimeoutError, but a few paths
#: (connection set-up, a reset mid-read) surface the builtin OSError subclasses.
REDIS_DOWN: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    ConnectionError,
    TimeoutError,
)

DEFAULT_RECONNECT_INTERVAL_S = 5.0
DEFAULT_SOCKET_TIMEOUT_S = 1.0
DEFAULT_CONNECT_TIMEOUT_S = 0.5


def fail_fast_client(
    url: str,
    *,
    socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_connections: int | None = 64,
) -> aioredis.Redis:
    """Return a client for ``url`` that does not retry and times out quickly.

    The stores own the degradation policy (fall back to memory, probe later); a client
    that silently retries for seconds would stall every LLM call while Redis is down.
    """
    return aioredis.Redis.from_url(
        url,
        socket_timeout=socket_timeout_s,
        socket_connect_timeout=connect_timeout_s,
        retry=Retry(NoBackoff(), 0),
        max_connections=max_connections,
        decode_responses=False,
    )


def describe(client: aioredis.Redis) -> str:
    """Return ``redis://host:port/db`` for a client, without any password."""
    kw = client.connection_pool.connection_kwargs
    if "path" in kw:
        return f"redis+unix://{kw['path']}"
    return f"redis://{kw.get('host', '?')}:{kw.get('port', '?')}/{kw.get('db', 0)}"


class RedisLink:
    """Reachability state of one Redis client, with throttled reconnects."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        name: str,
        reconnect_interval_s: float = DEFAULT_RECONNECT_INTERVAL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Track ``client``; ``name`` prefixes log lines, ``clock`` paces reconnect attempts."""
        if reconnect_interval_s < 0:
            raise ValueError("reconnect_interval_s must be >= 0")
        self.client = client
        self.name = name
        self.reconnect_interval_s = reconnect_interval_s
        self._clock = clock
        self._degraded_since: float | None = None
        self._last_error: str | None = None
        self._last_attempt = 0.0
        self._lock = asyncio.Lock()

    @property
    def degraded(self) -> bool:
        """True while the store must serve from its local fallback."""
        return self._degraded_since is not None

    def mark_down(self, exc: BaseException) -> bool:
        """Record that Redis failed with ``exc``; return True if this starts a new outage."""
        self._last_error = f"{type(exc).__name__}: {exc}"
        self._last_attempt = self._clock()
        if self._degraded_since is not None:
            return False
        self._degraded_since = self._last_attempt
        record.store_outage(self.name)
        log.warning(
            "%s: Redis at %s unreachable (%s); serving from a local view until it returns",
            self.name,
            describe(self.client),
            self._last_error,
        )
        return True

    async def recover(self, resync: Callable[[], Awaitable[None]]) -> bool:
        """Try to leave degraded mode; return True if Redis is usable now.

        Does nothing (returns False) until ``reconnect_interval_s`` has passed since the
        last failure. Otherwise pings Redis on fresh connections, runs ``resync`` and
        clears the degraded state. If the ping or the resync fails, the link stays
        degraded and the next attempt waits another interval.
        """
        if not self.degraded:
            return True
        if self._clock() - self._last_attempt < self.reconnect_interval_s:
            return False
        if self._lock.locked():
            # Another caller is already reconnecting; do not queue behind its replay.
            return False
        async with self._lock:
            if not self.degraded:
                return True
            self._last_attempt = self._clock()
            try:
                # Pooled connections to the dead server are half-closed sockets; drop them
                # so the ping and the replay run on new ones.
                await self.client.connection_pool.disconnect()
                await self.client.ping()
                await resync()
            except REDIS_DOWN as exc:
                self._last_error = f"{type(exc).__name__}: {exc}"
                self._last_attempt = self._clock()
                return False
            outage = self._clock() - (self._degraded_since or self._clock())
            self._degraded_since = None
            log.warning(
                "%s: Redis at %s reachable again after %.1fs; local state resynced",
                self.name,
                describe(self.client),
                outage,
            )
            return True

    def status(self, *, pending: int = 0, dropped: int = 0) -> StoreStatus:
        """Return the link's state as a :class:`StoreStatus`."""
        return StoreStatus(
            backend=describe(self.client),
            healthy=not self.degraded,
            degraded_since=self._degraded_since,
            last_error=self._last_error,
            pending_sync=pending,
            dropped_sync=dropped,
        )
