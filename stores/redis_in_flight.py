"""User calls in flight per route in Redis (:class:`~stores.in_flight.InFlight`).

``NS:h:{route}:f`` is a sorted set lease -> ``until`` (workflow-clock seconds). Taking a
lease is one script (drop expired leases, add this one, make the key live at least as long
as it: a shorter lease never cuts a longer one's);
the role context's take rides in its snapshot's pipeline (:class:`QueuedTake`);
giving it back is one ``ZREM``; counting is one ``ZCOUNT`` of the leases not yet expired.
While Redis is away the store's local view holds the leases (never replayed: a lease is
worth nothing after its call).
"""

from __future__ import annotations

import logging
from typing import Any

from redis.commands.core import AsyncScript

from agent_failover.stores.in_flight import LeaseTake, MemoryInFlight
from agent_failover.stores.redis_context import RedisContext
from agent_failover.stores.redis_fallback import RedisFallback
from agent_failover.stores.redis_scripts import reload_script

log = logging.getLogger(__name__)

#: The key outlives its longest lease by this much (wall clock vs workflow clock).
KEY_MARGIN_S = 60.0

# Take a lease. KEYS: the route's lease set. ARGV: now, until, lease, key TTL ms. Expired
# leases go; the key's TTL only grows (a shorter lease never cuts a longer one's).
TAKE_LUA = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 1
"""


class RedisInFlight:
    """In-flight leases shared by every worker through Redis, local while Redis is away."""

    def __init__(self, ctx: RedisContext, fallback: RedisFallback) -> None:
        self._ctx = ctx
        self._fallback = fallback
        self._take = ctx.client.register_script(TAKE_LUA)

    def key(self, route: str) -> str:
        """The sorted set of ``route``'s leases."""
        return f"{self._ctx.keys.prefix(route)}f"

    async def start(self, route: str, lease: str, *, now: float, until: float) -> None:
        async def remote() -> None:
            await self._take(keys=[self.key(route)], args=_take_args(lease, now, until))

        await self._fallback.run(
            remote, lambda local: _local(local).start(route, lease, now=now, until=until)
        )

    async def end(self, route: str, lease: str) -> None:
        async def remote() -> None:
            await self._ctx.client.zrem(self.key(route), lease)

        await self._fallback.run(remote, lambda local: _local(local).end(route, lease))

    def queued_take(self, take: LeaseTake, now: float) -> QueuedTake:
        """Taking a lease as a rider on the snapshot's pipeline (:mod:`stores.redis_reads`)."""
        return QueuedTake(self._take, self.key(take.route), _take_args(take.lease, now, take.until))

    def queued_end(self, route: str, lease: str) -> QueuedEnd:
        """Giving ``lease`` back as a rider on the outcome record's pipeline (its ``ZREM``)."""
        return QueuedEnd(self, route, lease)

    async def count(self, route: str, now: float) -> int:
        async def remote() -> int:
            return int(await self._ctx.client.zcount(self.key(route), f"({now}", "+inf"))

        return await self._fallback.run(remote, lambda local: _local(local).count(route, now))


def _take_args(lease: str, now: float, until: float) -> list[Any]:
    """``TAKE_LUA``'s arguments: the key lives past ``until`` by :data:`KEY_MARGIN_S`."""
    ttl_ms = int((max(until - now, 0.0) + KEY_MARGIN_S) * 1000)
    return [now, until, lease, ttl_ms]


class QueuedTake:
    """A lease's ``TAKE_LUA`` riding in the snapshot's round trip, as a plain ``EVALSHA``
    (as the snapshot's own script: no ``SCRIPT EXISTS`` first; :meth:`load` on NOSCRIPT)."""

    def __init__(self, script: AsyncScript, key: str, args: list[Any]) -> None:
        self._script, self.key, self.args = script, key, args

    def queue(self, pipe: Any) -> None:
        """Add the take to ``pipe``."""
        pipe.evalsha(self._script.sha, 1, self.key, *self.args)

    async def alone(self) -> Any:
        """The take on its own (Redis Cluster: scripts are not pipelined there)."""
        return await self._script(keys=[self.key], args=self.args)

    async def load(self) -> None:
        """Load the script (a restarted or flushed server answered NOSCRIPT)."""
        await reload_script(self._script)


def _local(view: object) -> MemoryInFlight:
    """The local view's leases."""
    leases = getattr(view, "in_flight", None)
    assert isinstance(leases, MemoryInFlight)
    return leases


class QueuedEnd:
    """A lease's ``ZREM`` riding in the record's round trip (:mod:`stores.after_call`).

    A lease not given back (an error reply, Redis lost in that round trip) is logged and
    expires by itself at its ``until``, as when :meth:`RedisInFlight.end` fails.
    """

    def __init__(self, leases: RedisInFlight, route: str, lease: str) -> None:
        self._leases, self._route, self._lease = leases, route, lease
        self.command: tuple[Any, ...] = ("ZREM", leases.key(route), lease)
        self.settled = False

    async def done(self, result: Any) -> None:
        """The ``ZREM``'s reply."""
        self.settled = True
        if isinstance(result, Exception):
            log.warning("in-flight lease on %r not given back: %s", self._route, result)

    async def failed(self, exc: BaseException) -> None:
        """Redis was lost before the reply: the lease lapses by itself."""
        self.settled = True
        log.warning("in-flight lease on %r not given back: %s", self._route, exc)

    async def alone(self) -> None:
        """The pipeline was never sent: an ordinary end (local while Redis is away)."""
        self.settled = True
        try:
            await self._leases.end(self._route, self._lease)
        except Exception as exc:  # any store fault; the lease expires on its own
            log.warning("in-flight lease on %r not given back: %s", self._route, exc)
