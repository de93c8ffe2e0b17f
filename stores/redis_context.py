"""What the parts of the Redis health store share: the client, its key names and scripts,
the TTLs, and the last state this process read from Redis; and :class:`QueuedWrite`, the
shape of another store's write riding in the outcome record's pipeline
(:mod:`stores.after_call`).

That last state (:class:`SeenState`) is what the store falls back to when Redis is lost:
every part updates it as it reads or writes, and :meth:`SeenState.local_view` seeds a
:class:`~stores.memory_health.MemoryHealthStore` from it (breakers, facts, newest
observations, and the last merged window as one bucket).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from agent_failover.resilience.breaker import Breaker
from agent_failover.resilience.shadow import QualityState
from agent_failover.stores.memory_health import MemoryHealthStore
from agent_failover.stores.memory_routes import RouteFacts
from agent_failover.stores.redis_keys import BUCKET_TTL_MARGIN_S, HealthKeys
from agent_failover.stores.redis_scripts import HealthScripts


class QueuedWrite(Protocol):
    """Another write (one command) riding in the health store's record pipeline."""

    #: True once the write's fate is settled (answered, failed, or written on its own).
    settled: bool
    #: The command, as ``execute_command`` takes it.
    command: tuple[Any, ...]

    async def done(self, result: Any) -> None:
        """The pipeline answered: the command's reply (an exception instance if it failed)."""
        ...

    async def failed(self, exc: BaseException) -> None:
        """The round trip failed (Redis lost) before the write was answered."""
        ...

    async def alone(self) -> None:
        """The pipeline was never sent (the health store was degraded): write on its own."""
        ...


@dataclass
class SeenState:
    """The last state read from (or written to) Redis, by route and by role."""

    breakers: dict[str, Breaker] = field(default_factory=dict)
    #: route -> (second of the read, merged window fields)
    windows: dict[str, tuple[int, dict[str, int]]] = field(default_factory=dict)
    #: route -> newest observations, newest first (as LRANGE returns them)
    recent: dict[str, list[str]] = field(default_factory=dict)
    facts: dict[str, RouteFacts] = field(default_factory=dict)
    #: role -> (demoted routes, route -> when the verdict changed)
    sla: dict[str, tuple[set[str], dict[str, float]]] = field(default_factory=dict)
    quality: dict[tuple[str, str], QualityState] = field(default_factory=dict)
    #: route -> (when the request that read it was sent, the breaker it read): the newest
    #: read of each breaker, which may answer a closed route's admission for a bounded age
    #: (:func:`resilience.admission.admit_from_read`).
    breaker_reads: dict[str, tuple[float, Breaker]] = field(default_factory=dict)
    #: The clock of ``breaker_reads`` (monotonic: only ages are taken from it).
    clock: Callable[[], float] = time.monotonic

    def saw_breaker(self, route: str, b: Breaker, sent_at: float) -> None:
        """Remember ``b`` as read (or written) by a request sent at ``sent_at``.

        A read's reply reflects the breaker at some moment after the request was sent, so
        its age counts from then; a slower reply to an older request does not replace a
        newer read (another of this process's requests may have opened the breaker since).
        """
        self.breakers[route] = b
        newest = self.breaker_reads.get(route)
        if newest is None or sent_at >= newest[0]:
            self.breaker_reads[route] = (sent_at, b)

    def local_view(self, *, horizon_s: float, baseline_refresh_s: float) -> MemoryHealthStore:
        """A memory store seeded with everything seen, to serve while Redis is away."""
        local = MemoryHealthStore(horizon_s=horizon_s, baseline_refresh_s=baseline_refresh_s)
        for route, b in self.breakers.items():
            local.routes.load(route, breaker=b)
        for route, window in self.windows.items():
            local.routes.load(route, window=window)
        for route, recent in self.recent.items():
            # LRANGE returns newest first; the local deque appends oldest first.
            local.routes.load(route, recent=reversed(recent))
        for route, facts in self.facts.items():
            local.routes.load(route, facts=facts)
        for role, (demoted, since) in self.sla.items():
            local.roles.load_sla(role, demoted, since)
        for (role, route), state in self.quality.items():
            local.roles.load_quality(role, route, state)
        return local


@dataclass(frozen=True)
class RedisContext:
    """One store's client, keys, scripts, TTLs and seen state, handed to each of its parts."""

    client: aioredis.Redis
    keys: HealthKeys
    scripts: HealthScripts
    seen: SeenState
    ttl_s: float
    horizon_s: float
    baseline_refresh_s: float

    @classmethod
    def create(
        cls,
        client: aioredis.Redis,
        *,
        namespace: str,
        ttl_s: float,
        horizon_s: float,
        baseline_refresh_s: float,
        read_clock: Callable[[], float] = time.monotonic,
    ) -> RedisContext:
        """Register the scripts on ``client`` and start with nothing seen (``read_clock``
        stamps the breaker reads)."""
        return cls(
            client=client,
            keys=HealthKeys(namespace),
            scripts=HealthScripts.register(client),
            seen=SeenState(clock=read_clock),
            ttl_s=ttl_s,
            horizon_s=horizon_s,
            baseline_refresh_s=baseline_refresh_s,
        )

    @property
    def cluster(self) -> bool:
        """True on Redis Cluster, where scripts cannot be pipelined and MULTI spans one slot."""
        return isinstance(self.client, RedisCluster)

    @property
    def ttl_ms(self) -> int:
        """The TTL of probe facts, recent observations, samples and baselines."""
        return int(self.ttl_s * 1000)

    @property
    def bucket_ttl_ms(self) -> int:
        """The TTL of aggregate buckets: the horizon plus a margin."""
        return int((self.horizon_s + BUCKET_TTL_MARGIN_S) * 1000)
