"""The health store contract: where breaker state and rolling outcome windows live.

Every ``call_model`` activity records its outcome here and every plan starts from a
:class:`~resilience.contracts.HealthSnapshot` read from here. The store holds no policy:
it appends outcomes, computes window statistics with :mod:`resilience.windows` and lets
:mod:`resilience.breaker` decide transitions, then persists the result atomically per
route so many workers can record at once without losing an outcome or tripping a
breaker twice. Two implementations share one contract test suite:

* :class:`~stores.memory_health.MemoryHealthStore`: one process, an ``asyncio.Lock`` per
  route; used in unit tests and as the fallback view of the Redis store.
* :class:`~stores.redis_health.RedisHealthStore`: shared by every worker through Redis,
  compare-and-set on the breaker version, degrades to a local view if Redis is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agent_failover.resilience.admission import Admission
from agent_failover.resilience.baseline import LatencyBaseline
from agent_failover.resilience.breaker import Breaker, Transition
from agent_failover.resilience.budget import BucketLevel, Scope
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import (
    BreakerState,
    CallOutcome,
    CostEfficiency,
    HealthSnapshot,
)
from agent_failover.resilience.shadow import QualitySample, QualityState
from agent_failover.stores.budgets import BudgetGrant
from agent_failover.stores.in_flight import InFlight, LeaseTake
from agent_failover.stores.status import StoreStatus


@runtime_checkable
class HealthStore(Protocol):
    """Persistence for per-route outcome windows, breakers, SLA demotions and probe results."""

    #: Leases of the user calls in flight on each route (:mod:`stores.in_flight`).
    in_flight: InFlight

    async def record(self, outcome: CallOutcome, settings: BreakerSettings) -> Transition | None:
        """Append ``outcome`` to its route's window and apply the breaker; return any transition.

        Statistics are computed over the breaker's windows ending at ``outcome.at``; slow
        calls are judged against :meth:`latency_baseline`. The append and the breaker
        update are atomic per route across all workers. A real (non-probe) outcome also
        stamps the route's ``last_call_at``; a successful real call feeds the route's
        hourly latency histogram (the long-horizon baseline).
        """
        ...

    async def admit(
        self,
        route: str,
        settings: BreakerSettings,
        now: float,
        *,
        hold_s: float | None = None,
        probe: bool = False,
    ) -> Admission:
        """Ask the route's breaker for permission to call; half-open trial slots are atomic.

        A real call's trial slot is a lease (``Admission.lease``) that lapses ``hold_s``
        (the attempt's timeout; None: ``DEFAULT_TRIAL_HOLD_S``) plus
        ``trial_lease_grace_s`` after ``now``. A probe (``probe``) never takes or waits for
        a trial slot (:func:`resilience.admission.admit_probe`).
        """
        ...

    async def release_trial(self, route: str, now: float, lease: str | None = None) -> None:
        """Give back a half-open trial lease that was admitted but never reported."""
        ...

    async def force(self, route: str, target: BreakerState | None, now: float) -> Transition:
        """Force the breaker open/closed, or release it (``target=None``) back to CLOSED."""
        ...

    async def breaker(self, route: str) -> Breaker:
        """Return the route's current breaker (a fresh CLOSED one if never seen)."""
        ...

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
        """Read each route's :class:`~resilience.contracts.RouteHealth`.

        Breaker state and a 429's ``cooldown_until``, window stats over ``window_s``, the
        role's SLA verdict and when it changed (``sla_since``), the last probe, the last
        real call, the learned context window, and the newest observations (``recent``).
        ``lease``, when given, is taken in :attr:`in_flight` with the read (in its round
        trip): the role context's lease for the call's first attempt.
        """
        ...

    async def set_sla_demoted(
        self, role: str, route: str, demoted: bool, *, at: float | None = None
    ) -> None:
        """Mark (or clear) ``route`` as latency-demoted for ``role``; ``at`` is when the
        verdict changed (reported as ``sla_since``)."""
        ...

    async def record_quality(self, role: str, route: str, sample: QualitySample) -> None:
        """Append one shadow-evaluation sample (agreement with the reference route) of
        ``route`` for ``role``; the newest ``MAX_QUALITY_SAMPLES`` are kept."""
        ...

    async def quality(self, role: str, route: str) -> QualityState:
        """``route``'s shadow samples for ``role`` (oldest first) and its quality verdict."""
        ...

    async def set_quality_regressed(
        self, role: str, route: str, regressed: bool, *, at: float, delta: float | None = None
    ) -> None:
        """Mark (or clear) ``route`` as ``QUALITY_REGRESSION`` for ``role``; ``at`` is when
        the verdict changed (reported as ``quality_since`` in snapshots)."""
        ...

    async def learn_context_window(self, route: str, tokens: int, now: float) -> None:
        """Remember the context window ``route``'s provider stated in a rejection."""
        ...

    async def latency_baseline(
        self, route: str, *, now: float, min_samples: int
    ) -> LatencyBaseline:
        """The route's short (recent window) and long (7-day hourly) p95 baselines."""
        ...

    async def cost_efficiency(self, route: str, *, now: float) -> CostEfficiency:
        """The route's useful tokens and spend over the current window (the store's
        horizon) and over the completed hours of the last 7 days, with its persisted
        cost-efficiency verdict (:mod:`resilience.cost_efficiency`). Every billed real
        attempt (``cost_usd`` > 0, not a probe) counts its spend; only answered ones count
        their ``tokens``."""
        ...

    async def set_cost_demoted(self, route: str, demoted: bool, *, at: float) -> None:
        """Mark (or clear) ``route`` as demoted for cost efficiency; ``at`` is when the
        verdict changed (reported as ``since``)."""
        ...

    async def take_budget(
        self, scopes: Sequence[Scope], tokens: int, *, critical: bool, now: float
    ) -> BudgetGrant:
        """Reserve one request and ``tokens`` tokens from every rate-budget scope, or nothing.

        Each scope's buckets are taken atomically for all workers; a refusal gives back
        what earlier scopes granted and says how long the refusing scope needs to refill
        (:mod:`stores.budgets`). A non-``critical`` call may not dip into a reserve.
        """
        ...

    async def settle_budget(self, grant: BudgetGrant, actual_tokens: int, now: float) -> None:
        """Charge the difference between ``grant``'s token estimate and the actual usage."""
        ...

    async def budget_levels(self, scopes: Sequence[Scope], now: float) -> list[BucketLevel]:
        """Every bucket of ``scopes``, refilled to ``now`` (never used: full)."""
        ...

    async def status(self) -> StoreStatus:
        """Report the backend's health."""
        ...

    async def close(self) -> None:
        """Release connections; the store must not be used afterwards."""
        ...


from agent_failover.stores.memory_health import MemoryHealthStore  # noqa: E402  (re-export)
from agent_failover.stores.redis_health import RedisHealthStore  # noqa: E402  (re-export)

__all__ = ["HealthStore", "MemoryHealthStore", "RedisHealthStore"]
