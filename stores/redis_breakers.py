"""Breakers in Redis: one hash per route, changed only by compare-and-set on its version.

``admit``/``release_trial``/``force`` read the breaker, let :mod:`resilience.breaker`
decide, and write the result with ``CAS_LUA``; a lost race re-reads and re-decides. That
makes half-open trial slots atomic across workers, and a transition happen once (the
second writer sees the new state and has nothing to do). Trial slots are leases kept in
the breaker value itself (id and expiry): taking one, giving one back and dropping the
expired ones are the same compare-and-set, so a worker that dies holding one only holds
it until the lease lapses. Every write sets the key's idle TTL
(:data:`~stores.redis_keys.IDLE_TTL_MS`, a week, which every outcome and probe of the
route renews), so an open breaker never closes because its key expired while the route
is in use; a forced breaker has no TTL at all (an operator's decision lasts until released).
"""

from __future__ import annotations

from collections.abc import Callable

from agent_failover.resilience.admission import Admission, admit, admit_probe
from agent_failover.resilience.breaker import Breaker, Transition, force, release_trial
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState
from agent_failover.stores.memory_health import new_lease_id
from agent_failover.stores.redis_context import RedisContext
from agent_failover.stores.redis_keys import IDLE_TTL_MS

#: Compare-and-set attempts before giving up; each failure means another worker changed
#: the breaker in between, so this only runs out under pathological contention.
MAX_CAS_ATTEMPTS = 64


class StoreContentionError(RuntimeError):
    """A breaker compare-and-set kept losing races; the breaker was left unchanged."""


def parse_breaker(route: str, raw: bytes | None) -> Breaker:
    """The breaker JSON stored for ``route``, or a fresh CLOSED breaker if none."""
    return Breaker.model_validate_json(raw) if raw else Breaker(route=route)


def breaker_ttl_ms(b: Breaker) -> int:
    """The TTL a breaker is written with: none (0) when forced, else the idle TTL."""
    forced = b.state in (BreakerState.FORCED_OPEN, BreakerState.FORCED_CLOSED)
    return 0 if forced else IDLE_TTL_MS


def contention(route: str) -> StoreContentionError:
    """The error for a breaker whose every compare-and-set lost."""
    return StoreContentionError(f"breaker {route!r}: {MAX_CAS_ATTEMPTS} lost compare-and-sets")


class RedisBreakers:
    """Read and change route breakers in Redis, atomically across workers."""

    def __init__(self, ctx: RedisContext) -> None:
        """Work through ``ctx``'s client; every breaker read or written is remembered."""
        self._ctx = ctx

    async def read(self, route: str) -> Breaker:
        """The route's breaker (CLOSED if never seen)."""
        sent_at = self._ctx.seen.clock()
        b = parse_breaker(route, await self._ctx.client.hget(self._ctx.keys.breaker(route), "b"))
        self._ctx.seen.saw_breaker(route, b, sent_at)
        return b

    async def cas_write(self, bkey: str, current: Breaker, new: Breaker) -> bool:
        """Write ``new`` if the stored breaker is still ``current``'s version."""
        args = [current.version, new.version, new.model_dump_json(), breaker_ttl_ms(new)]
        return bool(await self._ctx.scripts.cas(keys=[bkey], args=args))

    async def update(self, route: str, step: Callable[[Breaker], tuple[Breaker, object]]) -> object:
        """Read the breaker, apply ``step``, compare-and-set; retry on a lost race."""
        bkey = self._ctx.keys.breaker(route)
        for _ in range(MAX_CAS_ATTEMPTS):
            sent_at = self._ctx.seen.clock()
            current = parse_breaker(route, await self._ctx.client.hget(bkey, "b"))
            new, result = step(current)
            if new == current or await self.cas_write(bkey, current, new):
                self._ctx.seen.saw_breaker(route, new, sent_at)
                return result
        raise contention(route)

    async def admit(
        self, route: str, settings: BreakerSettings, now: float, *, hold_s: float, probe: bool
    ) -> Admission:
        """Ask the breaker: a call's half-open trial lease is taken, and expired leases
        dropped, in the same compare-and-set; a probe takes no slot."""
        lease_id = new_lease_id()

        def step(b: Breaker) -> tuple[Breaker, Admission]:
            if probe:
                new, admission, _ = admit_probe(b, now)
            else:
                new, admission, _ = admit(b, settings, now, hold_s=hold_s, lease_id=lease_id)
            return new, admission

        result = await self.update(route, step)
        assert isinstance(result, Admission)
        return result

    async def release_trial(self, route: str, now: float, lease: str | None = None) -> None:
        """Give back a trial slot's lease."""
        await self.update(route, lambda b: (release_trial(b, now, lease), None))

    async def force(self, route: str, target: BreakerState | None, now: float) -> Transition:
        """Force or release the breaker; raises ``IllegalTransition`` for rejected moves."""
        result = await self.update(route, lambda b: force(b, target, now))
        assert isinstance(result, Transition)
        return result

    async def restore(self, breakers: dict[str, Breaker]) -> None:
        """Write back the breakers a local view changed, where Redis has none at all."""
        for route, b in breakers.items():
            if b.version > 0:
                # Only where Redis has no breaker at all (a restarted, empty server):
                # otherwise other workers kept Redis current and it wins.
                args = [0, b.version, b.model_dump_json(), breaker_ttl_ms(b)]
                await self._ctx.scripts.cas(keys=[self._ctx.keys.breaker(route)], args=args)
