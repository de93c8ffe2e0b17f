"""User calls in flight per route, as leases that expire: what the health monitor reads so
that a probe never joins (or steals a trial slot from) a user's call waiting on a route.

A ``call_model`` attempt takes a lease when it starts, or finds the one its call's role
context took in the snapshot's round trip (:class:`LeaseTake`, on the route the role tries
first), and gives it back when it ends; a lease also ends by itself at ``until`` (the
attempt's timeout plus a grace period), so a worker killed mid-call leaves nothing behind
for longer than that. Times are on the
workflow clock, as every health timestamp (:func:`activities.deps.workflow_now`).

Two implementations of :class:`InFlight`: :class:`MemoryInFlight` (one process; the Redis
store's local view while Redis is away) and :class:`~stores.redis_in_flight.RedisInFlight`
(one sorted set per route, lease -> ``until``; the key lives as long as its longest lease).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class LeaseTake:
    """A lease to take in another read's round trip (the role context's snapshot,
    :meth:`~stores.health.HealthStore.snapshot`): ``lease`` on ``route`` until ``until``."""

    route: str
    lease: str
    until: float


@dataclass(frozen=True)
class LeaseEnd:
    """An in-flight lease to give back: ``lease`` on ``route``."""

    route: str
    lease: str


@runtime_checkable
class InFlight(Protocol):
    """Leases of the user calls in flight on each route."""

    async def start(self, route: str, lease: str, *, now: float, until: float) -> None:
        """Count a call on ``route`` in flight until ``until`` unless :meth:`end` comes first."""
        ...

    async def end(self, route: str, lease: str) -> None:
        """The call holding ``lease`` ended (a lease never taken, or expired, is a no-op)."""
        ...

    async def count(self, route: str, now: float) -> int:
        """How many calls on ``route`` hold a lease that has not expired at ``now``."""
        ...


class MemoryInFlight:
    """:class:`InFlight` in process memory (expired leases are dropped as new ones come)."""

    def __init__(self) -> None:
        self._leases: dict[str, dict[str, float]] = {}

    async def start(self, route: str, lease: str, *, now: float, until: float) -> None:
        held = self._leases.setdefault(route, {})
        for old in [k for k, u in held.items() if u <= now]:
            del held[old]
        held[lease] = until

    async def end(self, route: str, lease: str) -> None:
        held = self._leases.get(route)
        if held is not None:
            held.pop(lease, None)
            if not held:
                del self._leases[route]

    async def count(self, route: str, now: float) -> int:
        return sum(1 for u in self._leases.get(route, {}).values() if u > now)
