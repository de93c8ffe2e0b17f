"""Redis connectivity bookkeeping shared by the Redis-backed stores.

A :class:`RedisLink` wraps one ``redis.asyncio.Redis`` client and remembers whether the
server is reachable. Stores call Redis inside ``try``/``except REDIS_DOWN``; on failure
they call :meth:`RedisLink.mark_down` and serve from a local fallback, and on every later
call they ask :meth:`RedisLink.recover` whether it is time to try again. The link logs one
warning per outage (not one per call, which would flood logs at request rate), probes at
most every ``reconnect_interval_s`` seconds, and runs the store's resync callback under a
lock so concurrent callers never replay the same backlog twice. :func:`fail_fast_client`
builds a client whose calls fail in well under a second when the server is gone, instead
of redis-py's default of retrying with exponential backoff, for one server, a Sentinel
master (``redis+sentinel://``) or a Redis Cluster (``redis+cluster://``). A burst above
the connection pool waits for a free connection: redis-py's default pool raises
``MaxConnectionsError`` (a ``ConnectionError``), which the stores would take for an
outage.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
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


#: Longest a command waits for a free pooled connection during a burst (standalone).
DEFAULT_POOL_TIMEOUT_S = 10.0
#: Connections per cluster node: redis-py's cluster client cannot wait for a free one
#: (it raises MaxConnectionsError), so the cap is set far above any worker's concurrency.
CLUSTER_NODE_CONNECTIONS = 4096
CLUSTER_SCHEME = "redis+cluster"
SENTINEL_SCHEME = "redis+sentinel"


def _hosts(netloc: str, default_port: int) -> tuple[dict[str, str], list[tuple[str, int]]]:
    """Credentials and ``host:port`` pairs of a comma-separated multi-host netloc."""
    creds: dict[str, str] = {}
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
        user, _, password = userinfo.partition(":")
        if user:
            creds["username"] = unquote(user)
        if password:
            creds["password"] = unquote(password)
    hosts = []
    for part in netloc.split(","):
        host, _, port = part.strip().rpartition(":") if ":" in part else (part, "", "")
        hosts.append((host or part.strip(), int(port) if port else default_port))
    return creds, hosts


def fail_fast_client(
    url: str,
    *,
    socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_connections: int | None = 64,
    pool_timeout_s: float = DEFAULT_POOL_TIMEOUT_S,
) -> aioredis.Redis:
    """Return a client for ``url`` that does not retry and times out quickly.

    The stores own the degradation policy (fall back to memory, probe later); a client
    that silently retries for seconds would stall every LLM call while Redis is down.

    ``url`` is ``redis://``, ``rediss://`` or ``unix://`` (one server), or
    ``redis+sentinel://[user:pass@]host:port[,host:port...]/<service>[/<db>]`` (the master
    Sentinel names; the password is the master's), or
    ``redis+cluster://[user:pass@]host:port[,host:port...]`` (Redis Cluster, from any
    startup nodes). A burst of calls above ``max_connections`` waits up to
    ``pool_timeout_s`` for a free connection instead of failing (a failure would be
    taken for an outage and switch the store to its local view).
    """
    parts = urlsplit(url)
    common: dict[str, Any] = {
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": connect_timeout_s,
        "retry": Retry(NoBackoff(), 0),
        "decode_responses": False,
    }
    if parts.scheme == CLUSTER_SCHEME:
        creds, hosts = _hosts(parts.netloc, 6379)
        client = RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in hosts],
            max_connections=max(max_connections or 0, CLUSTER_NODE_CONNECTIONS),
            **creds,
            **common,
        )
        client._failover_url = f"{CLUSTER_SCHEME}://" + ",".join(f"{h}:{p}" for h, p in hosts)
        return client  # type: ignore[return-value]  (the same command surface)
    if parts.scheme == SENTINEL_SCHEME:
        return _sentinel_client(parts, common)
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections or 2**31, timeout=pool_timeout_s, **common
    )
    return aioredis.Redis.from_pool(pool)


def _sentinel_client(parts: SplitResult, common: dict[str, Any]) -> aioredis.Redis:
    creds, hosts = _hosts(parts.netloc, 26379)
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError(
            f"{SENTINEL_SCHEME} URL needs the service name: "
            f"{SENTINEL_SCHEME}://host:26379/<service>[/<db>]"
        )
    sentinel = Sentinel(
        hosts,
        sentinel_kwargs={
            "socket_timeout": common["socket_timeout"],
            "socket_connect_timeout": common["socket_connect_timeout"],
        },
    )
    db = int(path[1]) if len(path) > 1 else 0
    # SentinelConnectionPool cannot block; left unbounded it never raises on a burst.
    client = sentinel.master_for(path[0], db=db, **creds, **common)
    client._failover_url = (
        f"{SENTINEL_SCHEME}://" + ",".join(f"{h}:{p}" for h, p in hosts) + f"/{path[0]}/{db}"
    )
    return client


def describe(client: aioredis.Redis) -> str:
    """Return ``redis://host:port/db`` (or the Sentinel/Cluster URL) without any password."""
    named = getattr(client, "_failover_url", None)
    if named is not None:
        return named
    kw = client.connection_pool.connection_kwargs
    if "path" in kw:
        return f"redis+unix://{kw['path']}"
    return f"redis://{kw.get('host', '?')}:{kw.get('port', '?')}/{kw.get('db', 0)}"


async def drop_connections(client: aioredis.Redis) -> None:
    """Close pooled connections (half-closed after an outage) so the next command reconnects."""
    if isinstance(client, RedisCluster):
        # Resets the topology too: the next command rediscovers the cluster's nodes.
        await client.aclose()
        return
    await client.connection_pool.disconnect()


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
        self._cluster_ready = not isinstance(client, RedisCluster)

    async def ready(self) -> None:
        """Learn a cluster's slot map once, before the first command.

        A burst of first commands on a fresh ``RedisCluster`` races its lazy set-up and
        fails with "connection closed" (measured: 12 of 40 concurrent first calls), which
        would read as an outage; one explicit ``initialize`` under a lock avoids it. After
        a reconnect the ping in :meth:`recover` re-learns the map the same way.
        """
        if self._cluster_ready:
            return
        async with self._lock:
            if not self._cluster_ready:
                await self.client.initialize()
                self._cluster_ready = True

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
                await drop_connections(self.client)
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
