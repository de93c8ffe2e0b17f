"""The shared health store: running aggregates and breakers in Redis, for every worker.

:class:`RedisHealthStore` is the :class:`~stores.health.HealthStore` façade over its
parts: the key layout (:mod:`stores.redis_keys`) and Lua scripts
(:mod:`stores.redis_scripts`), outcome recording (:mod:`stores.redis_outcomes`), breaker
compare-and-set (:mod:`stores.redis_breakers`), snapshot reads (:mod:`stores.redis_reads`),
SLA, quality and context-window facts (:mod:`stores.redis_facts`) and rate budgets
(:mod:`stores.redis_budgets`). Every operation goes through one
:meth:`~stores.redis_fallback.RedisFallback.run`, which serves it from a local view while
Redis is lost and queues its write for replay.

Concurrency: no outcome is lost (each record's increment is unconditional, in one script)
and a breaker transition happens once (compare-and-set on the breaker's version; the
second writer sees the new state and has nothing to do); half-open trial slots are
atomic across workers the same way.

Redis loss: once Redis answers again, breakers Redis lost (e.g. a restarted server
without persistence) are restored from the local view, queued outcomes are replayed
through the normal record path (idempotently: each carries the nonce of its first
attempt; as non-trial outcomes: trial slots taken locally do not exist in Redis), then
forced states, SLA flags, context windows and quality writes, in the order they were made.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

import redis.asyncio as aioredis

from agent_failover.resilience.admission import (
    DEFAULT_ADMIT_FROM_READ_S,
    Admission,
    admit_from_read,
)
from agent_failover.resilience.baseline import LatencyBaseline
from agent_failover.resilience.breaker import (
    DEFAULT_TRIAL_HOLD_S,
    Breaker,
    IllegalTransition,
    Transition,
)
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import (
    BreakerState,
    CallOutcome,
    CostEfficiency,
    HealthSnapshot,
)
from agent_failover.resilience.shadow import QualitySample, QualityState
from agent_failover.resilience.windows import DEFAULT_HORIZON_S
from agent_failover.stores.budgets import BudgetBuckets
from agent_failover.stores.in_flight import LeaseTake
from agent_failover.stores.memory_health import DEFAULT_BASELINE_REFRESH_S, MemoryHealthStore
from agent_failover.stores.redis_breakers import RedisBreakers
from agent_failover.stores.redis_budgets import RedisBudgets
from agent_failover.stores.redis_context import QueuedWrite, RedisContext
from agent_failover.stores.redis_cost import RedisCost
from agent_failover.stores.redis_facts import RedisFacts
from agent_failover.stores.redis_fallback import (
    Pending,
    PendingForce,
    PendingQuality,
    PendingRecord,
    PendingSla,
    PendingWindow,
    RedisFallback,
)
from agent_failover.stores.redis_in_flight import RedisInFlight
from agent_failover.stores.redis_link import DEFAULT_RECONNECT_INTERVAL_S, RedisLink
from agent_failover.stores.redis_outcomes import RedisOutcomes, new_nonce
from agent_failover.stores.redis_reads import RedisSnapshots
from agent_failover.stores.redis_shared_budgets import SharedBudgets
from agent_failover.stores.status import StoreStatus

DEFAULT_NAMESPACE = "failover"
DEFAULT_TTL_S = 3600.0
DEFAULT_MAX_PENDING = 2048


class RedisHealthStore(SharedBudgets):
    """A :class:`~stores.health.HealthStore` shared by all workers through Redis."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        ttl_s: float = DEFAULT_TTL_S,
        horizon_s: float = DEFAULT_HORIZON_S,
        baseline_refresh_s: float = DEFAULT_BASELINE_REFRESH_S,
        max_pending: int = DEFAULT_MAX_PENDING,
        reconnect_interval_s: float = DEFAULT_RECONNECT_INTERVAL_S,
        clock: Callable[[], float] = time.time,
        admit_from_read_s: float = DEFAULT_ADMIT_FROM_READ_S,
        read_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Use ``client`` (see :func:`stores.redis_link.fail_fast_client`) under ``namespace``.

        ``ttl_s`` must exceed ``horizon_s`` so a route's window outlives its samples;
        ``clock`` only paces reconnect attempts and stamps ``degraded_since``. A call's
        admission on a route whose breaker this process read CLOSED at most
        ``admit_from_read_s`` ago (on ``read_clock``) is answered from that read, without
        a round trip (:func:`resilience.admission.admit_from_read`; 0 asks Redis always).
        """
        if ttl_s < horizon_s:
            raise ValueError(f"ttl_s ({ttl_s}) must be >= horizon_s ({horizon_s})")
        self._r = client
        self.namespace = namespace
        self.ttl_s = ttl_s
        self.horizon_s = horizon_s
        self.baseline_refresh_s = baseline_refresh_s
        ctx = RedisContext.create(
            client,
            namespace=namespace,
            ttl_s=ttl_s,
            horizon_s=horizon_s,
            baseline_refresh_s=baseline_refresh_s,
            read_clock=read_clock,
        )
        self.keys, self._seen, self.admit_from_read_s = ctx.keys, ctx.seen, admit_from_read_s
        self._breakers = RedisBreakers(ctx)
        self._outcomes = RedisOutcomes(ctx, self._breakers)
        self._reads = RedisSnapshots(ctx)
        self._facts = RedisFacts(ctx)
        self._cost = RedisCost(ctx)
        self._budgets = BudgetBuckets(RedisBudgets(client, namespace=namespace))
        name, interval = f"health store [{namespace}]", reconnect_interval_s
        self.link = RedisLink(client, name=name, reconnect_interval_s=interval, clock=clock)
        self._fallback = RedisFallback(
            self.link,
            ctx.seen,
            max_pending=max_pending,
            horizon_s=horizon_s,
            baseline_refresh_s=baseline_refresh_s,
            restore=partial(_restore, self._breakers, self._facts),
            replay=partial(_replay, self._outcomes, self._breakers, self._facts),
        )
        #: The user calls in flight on each route (the health monitor does not probe them).
        self.in_flight = RedisInFlight(ctx, self._fallback)

    def bucket_key(self, route: str, second: int) -> str:
        """The hash of ``route``'s aggregates for one second (for tests and operators)."""
        return self.keys.bucket(route, second)

    def breaker_key(self, route: str) -> str:
        """The hash holding ``route``'s breaker."""
        return self.keys.breaker(route)

    async def record(
        self,
        outcome: CallOutcome,
        settings: BreakerSettings,
        *,
        also: Sequence[QueuedWrite] = (),
    ) -> Transition | None:
        """Append ``outcome`` and apply the breaker, atomically per route across workers.

        ``also`` (other writes to the same server, :mod:`stores.after_call`) ride in the
        record's round trip; one whose round trip is never sent (Redis is lost already) is
        written on its own, with its own store's fallback.
        """
        nonce = new_nonce()
        try:
            return await self._fallback.run(
                lambda: self._outcomes.record(outcome, settings, nonce, also),
                lambda local: local.record(outcome, settings),
                replay=PendingRecord(outcome, settings, nonce),
                replay_first=True,
            )
        finally:
            for write in also:
                if not write.settled:
                    await write.alone()

    async def latency_baseline(
        self, route: str, *, now: float, min_samples: int
    ) -> LatencyBaseline:
        """The route's short and long-horizon baselines and the one slow calls compare to."""
        return await self._fallback.run(
            lambda: self._outcomes.baseline(route, None, min_samples, now),
            lambda local: local.latency_baseline(route, now=now, min_samples=min_samples),
        )

    async def admit(
        self,
        route: str,
        settings: BreakerSettings,
        now: float,
        *,
        hold_s: float | None = None,
        probe: bool = False,
    ) -> Admission:
        """Ask the breaker; a half-open trial slot's lease is taken by compare-and-set (a
        probe takes none).

        A call on a route this process read CLOSED (or FORCED_CLOSED) within
        ``admit_from_read_s`` (the role context's snapshot before the plan, an earlier
        record or admission) is admitted from that read, without a round trip: a breaker
        another worker opened since admits calls here for at most that long. Any other
        state, an older read, a probe or a degraded link asks Redis (or the local view).
        """
        hold = DEFAULT_TRIAL_HOLD_S if hold_s is None else hold_s
        read = self._seen.breaker_reads.get(route)
        if read is not None and not probe and not self.link.degraded:
            sent_at, b = read
            age = self._seen.clock() - sent_at
            if (fresh := admit_from_read(b, now, age, self.admit_from_read_s)) is not None:
                return fresh
        return await self._fallback.run(
            lambda: self._breakers.admit(route, settings, now, hold_s=hold, probe=probe),
            lambda local: local.admit(route, settings, now, hold_s=hold, probe=probe),
        )

    async def release_trial(self, route: str, now: float, lease: str | None = None) -> None:
        """Give back a trial slot's lease (locally only while degraded: Redis never saw it)."""
        await self._fallback.run(
            lambda: self._breakers.release_trial(route, now, lease),
            lambda local: local.release_trial(route, now, lease),
        )

    async def force(self, route: str, target: BreakerState | None, now: float) -> Transition:
        """Force or release the breaker; raises ``IllegalTransition`` for rejected moves."""
        return await self._fallback.run(
            lambda: self._breakers.force(route, target, now),
            lambda local: local.force(route, target, now),
            replay=PendingForce(route, target, now),
        )

    async def breaker(self, route: str) -> Breaker:
        """Return the route's breaker (CLOSED if never seen)."""
        return await self._fallback.run(
            lambda: self._breakers.read(route), lambda local: local.breaker(route)
        )

    async def snapshot(
        self,
        routes: Sequence[str],
        *,
        now: float,
        window_s: float,
        min_calls: int,
        role: str | None = None,
        lease: LeaseTake | None = None,
    ) -> HealthSnapshot:
        """Read all ``routes`` in one round trip (taking ``lease`` in it); marks the
        snapshot if served locally (the lease is then the local view's)."""
        return await self._fallback.run(
            lambda: self._reads.snapshot(
                routes,
                now=now,
                window_s=window_s,
                min_calls=min_calls,
                role=role,
                take=self.in_flight.queued_take(lease, now) if lease is not None else None,
            ),
            lambda local: _degraded(
                local.snapshot(
                    routes, now=now, window_s=window_s, min_calls=min_calls, role=role, lease=lease
                )
            ),
        )

    async def set_sla_demoted(
        self, role: str, route: str, demoted: bool, *, at: float | None = None
    ) -> None:
        """Mark or clear the role's latency demotion of ``route`` for every worker."""
        await self._fallback.run(
            lambda: self._facts.set_sla(role, route, demoted, at),
            lambda local: local.set_sla_demoted(role, route, demoted, at=at),
            replay=PendingSla(role, route, demoted, at),
        )

    async def record_quality(self, role: str, route: str, sample: QualitySample) -> None:
        """Append one shadow sample of ``route`` for ``role``, for every worker."""
        await self._fallback.run(
            lambda: self._facts.append_quality(role, route, sample),
            lambda local: local.record_quality(role, route, sample),
            replay=PendingQuality(role, route, sample),
        )

    async def set_quality_regressed(
        self, role: str, route: str, regressed: bool, *, at: float, delta: float | None = None
    ) -> None:
        """Mark or clear ``route`` as quality-regressed for ``role``, for every worker."""
        await self._fallback.run(
            lambda: self._facts.set_verdict(role, route, regressed, at, delta),
            lambda local: local.set_quality_regressed(role, route, regressed, at=at, delta=delta),
            replay=PendingQuality(role, route, None, (regressed, at, delta)),
        )

    async def quality(self, role: str, route: str) -> QualityState:
        """The route's shadow samples for ``role`` (oldest first) and its quality verdict."""
        return await self._fallback.run(
            lambda: self._facts.quality(role, route), lambda local: local.quality(role, route)
        )

    async def learn_context_window(self, route: str, tokens: int, now: float) -> None:
        """Remember the window ``route``'s provider stated, for every worker."""
        await self._fallback.run(
            lambda: self._facts.learn_window(route, tokens),
            lambda local: local.learn_context_window(route, tokens, now),
            replay=PendingWindow(route, tokens),
        )

    async def cost_efficiency(self, route: str, *, now: float) -> CostEfficiency:
        """The route's cost counters (current window, 7-day baseline) and its verdict."""
        return await self._fallback.run(
            lambda: self._cost.efficiency(route, now),
            lambda local: local.cost_efficiency(route, now=now),
        )

    async def set_cost_demoted(self, route: str, demoted: bool, *, at: float) -> None:
        """Mark or clear ``route``'s cost-efficiency demotion for every worker.

        Not queued for replay while Redis is away: the verdict is re-judged from the
        counters on every plan, so a lost write costs at most one hysteresis step.
        """
        await self._fallback.run(
            lambda: self._cost.set_verdict(route, demoted, at),
            lambda local: local.set_cost_demoted(route, demoted, at=at),
        )

    async def status(self) -> StoreStatus:
        """Report Redis reachability (trying to reconnect if due), the replay backlog and the
        key namespace (so a reader elsewhere, e.g. ``failover status``, reads the same keys)."""
        status = await self._fallback.status()
        return status.model_copy(update={"namespace": self.namespace})

    async def close(self) -> None:
        """Close the Redis client's connections."""
        await self._r.aclose()


async def _degraded(snapshot: Awaitable[HealthSnapshot]) -> HealthSnapshot:
    """A snapshot served by the local view, marked as such."""
    return (await snapshot).model_copy(update={"store_degraded": True})


async def _restore(breakers: RedisBreakers, facts: RedisFacts, local: MemoryHealthStore) -> None:
    """Write back what a restarted, empty Redis lost: breakers and context windows."""
    await breakers.restore(local.routes.breakers())
    await facts.restore_windows(local.routes.context_windows())


async def _replay(
    outcomes: RedisOutcomes, breakers: RedisBreakers, facts: RedisFacts, op: Pending
) -> None:
    """Apply one write queued while Redis was away."""
    if isinstance(op, PendingRecord):
        replay = op.outcome
        if replay.trial:
            replay = replay.model_copy(update={"trial": False})
        await outcomes.record(replay, op.settings, op.nonce)
    elif isinstance(op, PendingForce):
        try:
            await breakers.force(op.route, op.target, op.now)
        except IllegalTransition:
            pass  # Redis already holds that state (another worker, or step one)
    elif isinstance(op, PendingWindow):
        await facts.learn_window(op.route, op.tokens)
    elif isinstance(op, PendingQuality):
        if op.sample is not None:
            await facts.append_quality(op.role, op.route, op.sample)
        elif op.verdict is not None:
            await facts.set_verdict(op.role, op.route, *op.verdict)
    else:
        await facts.set_sla(op.role, op.route, op.demoted, op.at)
