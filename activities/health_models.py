"""Inputs and outputs of the health activities: probes, operator overrides, the status table.

What the health monitor workflow and the ``status``/``health`` commands exchange with
:mod:`activities.probes` and :mod:`activities.health`: pydantic models, no IO imports
(workflows import this module directly).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent_failover.resilience.breaker import Breaker, Transition
from agent_failover.resilience.budget import BucketLevel
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.config.gates import route_unqualified
from agent_failover.resilience.contracts import (
    BreakerState,
    CostEfficiency,
    HealthSnapshot,
    RouteHealth,
)


class ProbeInput(BaseModel):
    route: str
    now: float
    #: The monitor's probe interval: a closed route with real traffic more recent than
    #: this is not probed (resilience.probing). None: the policy's probes.interval_s.
    interval_s: float | None = None
    #: The faster cadence of half-open routes. None: the policy's (at most interval_s).
    half_open_interval_s: float | None = None


class ProbeResult(BaseModel):
    route: str
    ok: bool
    skipped: bool = False
    error_class: str | None = None
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    trial: bool = False
    breaker: BreakerState
    transition: Transition | None = None
    #: Why the route was (or was not) probed (resilience.probing.ProbeReason).
    reason: str | None = None


class ForceRouteInput(BaseModel):
    route: str
    state: BreakerState | None = Field(
        default=None, description="forced_open, forced_closed, or null to release"
    )
    now: float


class HealthTableInput(BaseModel):
    routes: list[str]
    now: float
    window_s: float = 60.0


class ContextWindow(BaseModel):
    """A route's context window: as configured (None: not configured, so not assumed),
    and as learned from a provider's own "maximum context length is N tokens" (None until
    one was seen)."""

    configured: int | None = None
    learned: int | None = None

    @property
    def effective(self) -> int | None:
        """What the planner goes by: the learned window, else the configured one."""
        return self.learned if self.learned is not None else self.configured


class QualityRow(BaseModel):
    """One route's shadow-evaluation verdict for one role (roles with ``shadow`` only)."""

    role: str
    route: str
    #: Marked ``QUALITY_REGRESSION`` for the role (what the planner goes by).
    regressed: bool = False
    #: When the verdict last changed (None: never).
    since: float | None = None
    #: ``1 - mean agreement`` over the role's shadow window now (None: under min_samples).
    delta: float | None = None
    #: The delta recorded when the verdict last changed.
    verdict_delta: float | None = None
    #: Shadow samples the verdict counts (in the window, since the last change).
    samples: int = 0
    min_samples: int = 1
    tolerance: float = 0.0


class QualificationStatus(BaseModel):
    """A role's qualification lock entry as ``failover status`` shows it."""

    role: str
    qualified_at: str
    golden_set: str
    #: What changed since the role was qualified (empty: fresh).
    stale: list[str] = Field(default_factory=list)
    #: The role treats a stale entry as unqualified.
    require_fresh: bool = False
    #: Routes the lock leaves out of the role's plans, with the gate that did.
    unqualified: dict[str, str] = Field(default_factory=dict)


def qualification_rows(policy: PolicyConfig) -> list[QualificationStatus]:
    """One row per role with a qualification lock entry."""
    out = []
    for name, role in policy.roles.items():
        q = role.qualification
        if q is None:
            continue
        why = {r: route_unqualified(r, role) for r in role.roster.routes()}
        out.append(
            QualificationStatus(
                role=name,
                qualified_at=q.qualified_at,
                golden_set=q.golden_set,
                stale=list(q.stale),
                require_fresh=role.quality_gates.require_fresh,
                unqualified={r: w for r, w in why.items() if w is not None},
            )
        )
    return out


class CostRow(BaseModel):
    """One route's tokens per dollar against its 7-day baseline, as ``failover status``
    shows it (:mod:`resilience.cost_efficiency`)."""

    route: str
    cost: CostEfficiency
    #: The policy's ``cost_efficiency.enabled``: the verdict demotes routes.
    demoting: bool = False
    #: Demoted under this share of the baseline, restored at ``restore_share``.
    min_share: float = 0.5
    restore_share: float = 0.625
    min_samples: int = 1


def cost_row(route: str, cost: CostEfficiency, policy: PolicyConfig) -> CostRow:
    """The status row of ``route`` from its figures and the policy's settings."""
    ce = policy.cost_efficiency
    return CostRow(
        route=route,
        cost=cost,
        demoting=ce.enabled,
        min_share=ce.min_share,
        restore_share=ce.min_share / policy.hysteresis_margin,
        min_samples=ce.min_samples,
    )


class HealthTable(BaseModel):
    taken_at: float
    rows: list[RouteHealth]
    breakers: list[Breaker]
    store: str
    #: The prefix of the shared store's keys (None: in memory, or a table from before it).
    store_namespace: str | None = None
    store_degraded: bool = False
    #: Why the shared store is degraded and since when (Redis lost: a local view is served).
    store_error: str | None = None
    store_degraded_since: float | None = None
    context_windows: dict[str, ContextWindow] = Field(default_factory=dict)
    #: Every rate-budget bucket of the policy (endpoints, then bulkheads), as all workers
    #: share them.
    budgets: list[BucketLevel] = Field(default_factory=list)
    #: Shadow-evaluation verdicts per role and route (roles with ``shadow`` settings).
    quality: list[QualityRow] = Field(default_factory=list)
    #: Each qualified role's lock entry: when, stale or not, routes left out.
    qualification: list[QualificationStatus] = Field(default_factory=list)
    #: Tokens per dollar per route against its baseline (routes with billed attempts).
    cost: list[CostRow] = Field(default_factory=list)


def context_windows(policy: PolicyConfig, snapshot: HealthSnapshot) -> dict[str, ContextWindow]:
    """Per route: the configured window and, when the health store learned one, that."""
    return {
        route: ContextWindow(
            configured=ep.context_window,
            learned=snapshot.get(route).context_window,
        )
        for route, ep in policy.endpoints.items()
    }
