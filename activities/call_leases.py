"""A model call's in-flight lease: what tells the health monitor a user's call is waiting
on a route (:mod:`stores.in_flight`), so no probe joins it (issue 22 §1.7).

The lease is taken beside the call, not before it: the store write runs as its own task
while the provider is being reached, so it adds no round trip to the call's latency. It is
given back when the attempt ends, however it ends (answer, failure, hedge cancel), again
as a task of its own (:meth:`CallLease.release_soon`: an answer is recorded meanwhile); a
worker killed mid-call leaves a lease that expires at the attempt's timeout plus
:data:`LEASE_GRACE_S`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from agent_failover.stores.in_flight import InFlight

log = logging.getLogger(__name__)

#: A lease outlives its attempt's timeout by this much (a slow last byte, clock skew).
LEASE_GRACE_S = 5.0
#: Releases in progress (asyncio keeps only weak references to tasks).
_RELEASING: set[asyncio.Future[None]] = set()


class CallLease:
    """One attempt's lease on ``route``: taken at construction, given back by :meth:`release`."""

    def __init__(self, leases: InFlight, route: str, *, now: float, timeout_s: float) -> None:
        self._leases = leases
        self._route = route
        self._id = uuid.uuid4().hex
        until = now + timeout_s + LEASE_GRACE_S
        self._taken = asyncio.ensure_future(leases.start(route, self._id, now=now, until=until))

    def release_soon(self) -> asyncio.Future[None]:
        """:meth:`release` as a task of its own (kept until done): await it to know the
        lease is back, or let it finish while the attempt's outcome is recorded."""
        task = asyncio.ensure_future(self.release())
        _RELEASING.add(task)
        task.add_done_callback(_RELEASING.discard)
        return task

    @property
    def id(self) -> str:
        """The lease's id in the in-flight store."""
        return self._id

    async def taken(self) -> bool:
        """Wait for the take; True if the lease is held (so it must be given back)."""
        await asyncio.wait([self._taken])
        failed = None if self._taken.cancelled() else self._taken.exception()
        if failed is not None or self._taken.cancelled():
            log.warning("in-flight lease on %r was not taken: %s", self._route, failed)
            return False
        return True

    async def release(self) -> None:
        """Give the lease back (after it was taken); a store error is logged, never raised:
        the lease then expires by itself. An answered call gives it back in its outcome
        record's round trip instead (:mod:`stores.after_call`)."""
        try:
            if await self.taken():
                await self._leases.end(self._route, self._id)
        except Exception as exc:  # any store fault; the lease expires on its own
            log.warning("in-flight lease on %r not given back: %s", self._route, exc)
