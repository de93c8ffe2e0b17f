"""The Redis health store's fallback: a local view while Redis is lost, and the replay.

Any ``ConnectionError``/``TimeoutError`` (``REDIS_DOWN``) switches the store to a local
:class:`~stores.memory_health.MemoryHealthStore` seeded with the last state this process
read from Redis (:class:`~stores.redis_context.SeenState`); the link logs one warning and
counts one outage, and writes are queued (bounded by ``max_pending``, oldest dropped and
counted). :meth:`RedisFallback.run` is the one place an operation chooses between Redis
and the local view. At most every ``reconnect_interval_s`` the link pings Redis; once it
answers, the store's ``restore`` pushes back what Redis lost and the queued writes are
replayed in order, then the local view is dropped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState, CallOutcome
from agent_failover.resilience.shadow import QualitySample
from agent_failover.stores.memory_health import MemoryHealthStore
from agent_failover.stores.redis_context import SeenState
from agent_failover.stores.redis_link import REDIS_DOWN, RedisLink
from agent_failover.stores.status import StoreStatus

T = TypeVar("T")


@dataclass(frozen=True)
class PendingRecord:
    """An outcome recorded locally, with the nonce of its first attempt."""

    outcome: CallOutcome
    settings: BreakerSettings
    nonce: str


@dataclass(frozen=True)
class PendingForce:
    """A breaker forced (or released) locally."""

    route: str
    target: BreakerState | None
    now: float


@dataclass(frozen=True)
class PendingSla:
    """An SLA verdict changed locally."""

    role: str
    route: str
    demoted: bool
    at: float | None


@dataclass(frozen=True)
class PendingWindow:
    """A context window learned locally."""

    route: str
    tokens: int


@dataclass(frozen=True)
class PendingQuality:
    """A shadow sample appended, or (``sample`` None) a quality verdict written, locally."""

    role: str
    route: str
    sample: QualitySample | None
    verdict: tuple[bool, float, float | None] | None = None


Pending = PendingRecord | PendingForce | PendingSla | PendingWindow | PendingQuality


class RedisFallback:
    """Chooses Redis or the local view per operation, and queues what Redis must replay."""

    def __init__(
        self,
        link: RedisLink,
        seen: SeenState,
        *,
        max_pending: int,
        horizon_s: float,
        baseline_refresh_s: float,
        restore: Callable[[MemoryHealthStore], Awaitable[None]],
        replay: Callable[[Pending], Awaitable[None]],
    ) -> None:
        """``restore`` writes back what Redis lost, ``replay`` one queued write; either
        raises ``REDIS_DOWN`` if Redis fails again (the link then stays degraded)."""
        self.link = link
        self._seen = seen
        self._horizon_s = horizon_s
        self._baseline_refresh_s = baseline_refresh_s
        self._restore = restore
        self._replay = replay
        self._pending: deque[Pending] = deque(maxlen=max_pending)
        self._dropped = 0
        self._local: MemoryHealthStore | None = None

    async def run(
        self,
        remote: Callable[[], Awaitable[T]],
        local: Callable[[MemoryHealthStore], Awaitable[T]],
        *,
        replay: Pending | None = None,
        replay_first: bool = False,
    ) -> T:
        """``remote()`` if Redis is usable, else (or if it fails with ``REDIS_DOWN``)
        ``local(view)`` on the local view, queueing ``replay`` for when Redis returns.

        ``replay`` is queued after ``local`` succeeds (a move the local view rejects is
        not replayed), or before it with ``replay_first`` (an outcome is replayed even if
        the local view changes while it waits for the route's lock).
        """
        if await self._use_redis():
            try:
                return await remote()
            except REDIS_DOWN as exc:
                view = self._go_local(exc)
        else:
            view = self._local_view()
        if replay is not None and replay_first:
            self._queue(replay)
        result = await local(view)
        if replay is not None and not replay_first:
            self._queue(replay)
        return result

    async def status(self) -> StoreStatus:
        """Reachability (trying to reconnect if due) and the replay backlog."""
        await self._use_redis()
        return self.link.status(pending=len(self._pending), dropped=self._dropped)

    async def _use_redis(self) -> bool:
        if not self.link.degraded:
            try:
                await self.link.ready()
            except REDIS_DOWN as exc:
                self._go_local(exc)
                return False
            return True
        return await self.link.recover(self._resync)

    def _go_local(self, exc: BaseException) -> MemoryHealthStore:
        self.link.mark_down(exc)
        if self._local is None:
            self._local = self._seen.local_view(
                horizon_s=self._horizon_s, baseline_refresh_s=self._baseline_refresh_s
            )
        return self._local

    def _local_view(self) -> MemoryHealthStore:
        assert self._local is not None, "degraded without a local view"
        return self._local

    def _queue(self, op: Pending) -> None:
        if len(self._pending) == self._pending.maxlen:
            self._dropped += 1
        self._pending.append(op)

    async def _resync(self) -> None:
        """Push the local view back into Redis; raises REDIS_DOWN if Redis fails again."""
        if self._local is not None:
            await self._restore(self._local)
        while self._pending:
            await self._replay(self._pending[0])
            self._pending.popleft()
        self._local = None
