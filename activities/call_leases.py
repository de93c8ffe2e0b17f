"""A model call's in-flight lease: what tells the health monitor a user's call is waiting
on a route (:mod:`stores.in_flight`), so no probe joins it (issue 22 §1.7).

A call's first attempt usually finds its lease taken already: its role context took it on
the role's first route in the snapshot's round trip (:class:`~activities.models.HeldLease`,
so a route is covered from the call's very start), and the attempt on that route holds it
(:class:`AttemptLeases`) when it is the activity's first try and the lease lasts its
timeout plus :data:`LEASE_GRACE_S` from its start. Any other attempt takes its own beside
the call, not before it: the store write runs as its own task while the provider is being
reached, so it adds no round trip to the call's latency (the role context's lease, if
unused, is given back with the attempt's own). A lease is
given back when the attempt ends, however it ends (answer, failure, hedge cancel), again
as a task of its own (:meth:`CallLease.release_soon`: an answer is recorded meanwhile); a
worker killed mid-call leaves a lease that expires at the attempt's timeout plus
:data:`LEASE_GRACE_S`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from agent_failover.activities.models import HeldLease
from agent_failover.stores.in_flight import InFlight, LeaseEnd

log = logging.getLogger(__name__)

#: A lease outlives its attempt's timeout by this much (a slow last byte, clock skew).
LEASE_GRACE_S = 5.0
#: How long after its role context's snapshot a call's first attempt may start and still
#: hold the lease taken with it (a workflow task, a dispatch, a queue wait): an attempt
#: starting later takes its own, so each is covered for its timeout plus the grace.
FIRST_START_SLACK_S = 5.0


def first_lease_until(now: float, attempt_timeout_s: float) -> float:
    """When the role context's lease, taken at ``now``, lapses by itself."""
    return now + attempt_timeout_s + LEASE_GRACE_S + FIRST_START_SLACK_S


#: Releases in progress (asyncio keeps only weak references to tasks).
_RELEASING: set[asyncio.Future[None]] = set()


class CallLease:
    """One attempt's lease on ``route``: taken at construction, given back by :meth:`release`."""

    def __init__(
        self, leases: InFlight, route: str, *, now: float, timeout_s: float, held: str = ""
    ) -> None:
        """Take a lease on ``route`` for ``timeout_s`` plus the grace, or with ``held``
        (a lease id) stand for one taken already."""
        self._leases = leases
        self._route = route
        self._id = held or uuid.uuid4().hex
        if held:
            self._taken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._taken.set_result(None)
            return
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
        if not self._taken.done():  # usually taken long ago: no loop round for nothing
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


class AttemptLeases:
    """One attempt's in-flight leases: its own (:meth:`take`), which is its role context's
    when that one fits, and the role context's when it does not (given back with it)."""

    def __init__(
        self, leases: InFlight, route: str, held: HeldLease | None, *, first_try: bool
    ) -> None:
        self._leases, self._route = leases, route
        #: The role context's lease while it is not this attempt's own.
        self._held = held
        self._first_try = first_try
        self.lease: CallLease | None = None

    def take(self, now: float, timeout_s: float) -> CallLease:
        """The attempt's lease: the role context's if it is on this route, this is the
        activity's first try (a retry's first try gave it back) and it lasts the attempt's
        timeout plus the grace from ``now``; else a new one, taken beside the call."""
        held = self._held
        if (
            held is not None
            and held.route == self._route
            and self._first_try
            and held.until >= now + timeout_s + LEASE_GRACE_S
        ):
            self._held = None
            self.lease = CallLease(self._leases, held.route, now=now, timeout_s=0, held=held.id)
        else:
            self.lease = CallLease(self._leases, self._route, now=now, timeout_s=timeout_s)
        return self.lease

    async def ends(self) -> list[LeaseEnd]:
        """After an answer, the leases its record's round trip gives back."""
        out = []
        if self.lease is not None and await self.lease.taken():
            out.append(LeaseEnd(self._route, self.lease.id))
        if self._held is not None:
            out.append(LeaseEnd(self._held.route, self._held.id))
        return out

    def release_soon(self) -> None:
        """Without an answer (a failure, a cancel, a refusal before the call): give every
        lease back, each as a task of its own (:meth:`CallLease.release_soon`)."""
        if self.lease is not None:
            self.lease.release_soon()
        if self._held is not None:
            held, self._held = self._held, None
            CallLease(self._leases, held.route, now=0.0, timeout_s=0, held=held.id).release_soon()
