"""The state one resilient call carries from its role context to its answer.

``resilient_complete`` runs a call through several modules (planning, attempts, hedging,
answers, degraded tiers); each reads and updates the same :class:`Call`: the request as
bounded for history, the role context, the attempts so far with the failover state they
built up, and the summary made before triage. :class:`AttemptResult` is one attempt's
outcome as the call folds it in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.models import CallModelResult, HeldLease, RoleContext
    from agent_failover.resilience.contracts import AttemptRecord, ReasonCode
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.options import CallOptions
    from agent_failover.resilience.outcomes import CallState
    from agent_failover.resilience.planner import PlannedAttempt
    from agent_failover.resilience.prompts import StructuredPath
    from agent_failover.workflows.observe import CallTelemetry


@dataclass
class AttemptResult:
    """One attempt's outcome: its record, and the reply or the error type and details."""

    attempt: PlannedAttempt
    record: AttemptRecord
    result: CallModelResult | None = None
    error_type: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    used_prefill: bool = False


@dataclass
class Prepared:
    """What :func:`attempts.prepare` chose for one route (recorded on its attempt)."""

    variant: str
    path: StructuredPath | None
    notes: list[str] = field(default_factory=list)


class Call:
    """One resilient call in progress (see :func:`resilient.resilient_complete`)."""

    #: The role's policy and route health, with the call's options applied (set first).
    ctx: RoleContext
    #: When the call started (epoch seconds) and its cache key (set with the context).
    started_at: float
    cache_key: str

    def __init__(
        self,
        role: str,
        request: ChatRequest,
        upstream: list[ReasonCode],
        options: CallOptions | None = None,
    ) -> None:
        self.role_name = role
        self.request = request
        self.upstream = upstream
        self.options = options
        self.attempts: list[AttemptRecord] = []
        self.state = CallState()
        self.hedges_used = 0
        self.obs = CallTelemetry()
        self.prepared: dict[str, Prepared] = {}
        self.own_system = request.system is not None
        #: Summarization before truncation: tried once per call, when triage first looms.
        self.summary_tried = False
        self.summarized: ChatRequest | None = None
        self.summary_note = ""
        self.summary_cost = 0.0
        #: The in-flight lease the role context took, until the first attempt carries it.
        self.first_lease: HeldLease | None = None
        #: The call's trial ticket (one ``workflow.random()`` draw), once drawn.
        self.ticket: float | None = None

    def hand_lease(self) -> HeldLease | None:
        """The role context's lease for the attempt being started: the call's first only
        (it holds the lease on its route, or gives it back)."""
        lease, self.first_lease = self.first_lease, None
        return lease
