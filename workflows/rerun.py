"""Degraded re-runs from workflow code: once a role's primary is back, ask it again.

The pipeline notes every step of a role with ``rerun`` settings that was answered
degraded (tier 2, cache or static). After its last stage it waits, per step, for the
role's primary to be restored (:func:`resilience.shadow.primary_restored`, checked every
``rerun.check_interval_s`` with the ``role_context`` local activity, until ``window_s``
after the step was served), re-runs the step's request on tier 0 only, and grades the
degraded answer against the primary's with the role's scorer (in workflow code:
``exact``, ``normalized`` or ``json``). An agreeing re-run is recorded as the step's
revised result; a material disagreement is handed to the pipeline's escalation desk.
Every command here runs only for noted steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.models import RoleContext, RoleContextInput
    from agent_failover.activities.role_context import RoleContextActivities
    from agent_failover.resilience.config import RerunSettings, RolePolicy, role_scorer
    from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.options import CallOptions, OnExhausted, RosterOverride
    from agent_failover.resilience.quality import score_local
    from agent_failover.resilience.shadow import (
        RerunStatus,
        StepRevision,
        primary_restored,
        rerun_verdict,
    )
    from agent_failover.workflows.errors import FailoverExhausted
    from agent_failover.workflows.planning import LOCAL_ACTIVITY_RETRY, ROLE_CONTEXT_TIMEOUT
    from agent_failover.workflows.resilient import resilient_complete

#: What the pipeline does with a disagreeing re-run: the revision, completed with the decision.
Escalate = Callable[[StepRevision], Awaitable[StepRevision]]


@dataclass
class _Noted:
    step: str
    role: str
    request: ChatRequest
    upstream: list[ReasonCode]
    output: AgentOutput
    served_at: float


@dataclass
class DegradedReruns:
    """The steps to re-run (:meth:`note`) and what their re-runs found (:attr:`revisions`)."""

    settings: dict[str, RerunSettings]
    noted: list[_Noted] = field(default_factory=list)
    revisions: list[StepRevision] = field(default_factory=list)
    waiting: int = 0

    def note(
        self,
        step: str,
        role: str,
        request: ChatRequest,
        upstream: list[ReasonCode] | None,
        out: AgentOutput,
    ) -> None:
        """Remember a step answered degraded by a role that asks for re-runs."""
        s = self.settings.get(role)
        if s is None or not s.enabled or not out.degraded or out.route == "human":
            return
        now = workflow.now().timestamp()
        self.noted.append(_Noted(step, role, request, list(upstream or []), out, now))

    def state(self) -> str:
        """One word for the ``RevisionState`` search attribute (the worst outcome so far)."""
        if self.waiting:
            return "pending"
        order = [RerunStatus.ESCALATED, RerunStatus.REVISED, RerunStatus.FAILED]
        seen = {r.status for r in self.revisions}
        return next((s.value for s in order if s in seen), "expired" if seen else "none")

    async def run(self, escalate: Escalate, on_change: Callable[[], None]) -> list[StepRevision]:
        """Re-run every noted step (concurrently), escalating disagreements; the revisions."""
        if not self.noted:
            return []
        self.waiting = len(self.noted)
        on_change()

        async def one(n: _Noted) -> None:
            rev = await self._rerun(n)
            if rev.status is RerunStatus.ESCALATED:
                rev = await escalate(rev)
            self.revisions.append(rev)
            self.waiting -= 1
            on_change()

        await asyncio.gather(*(one(n) for n in self.noted))
        return list(self.revisions)

    async def _rerun(self, n: _Noted) -> StepRevision:
        s = self.settings[n.role]
        base = StepRevision(
            step=n.step,
            role=n.role,
            status=RerunStatus.EXPIRED,
            original_tier=n.output.tier,
            original_capability=n.output.capability.value,
        )
        role = await self._wait_for_primary(n, s)
        if role is None:
            return _done(base, detail=f"primary not restored within {s.window_s:g}s")
        options = CallOptions(
            roster=RosterOverride(tier0=list(role.roster.tier0)), on_exhausted=OnExhausted.RAISE
        )
        try:
            out = await resilient_complete(
                n.role, n.request, options=options, upstream_reasons=n.upstream
            )
        except FailoverExhausted as exc:
            return _done(base, status=RerunStatus.FAILED, detail=str(exc)[:300])
        if out.capability is not Capability.FULL or out.refused:
            why = f"re-run answered {out.capability.value} (tier {out.tier})"
            return _done(base, status=RerunStatus.FAILED, detail=why)
        graded = score_local(role_scorer(role, s.scorer), out.content, n.output.content)
        status = rerun_verdict(graded.score, s.min_agreement)
        return _done(base, status=status, agreement=graded.score, detail=graded.detail, revised=out)

    async def _wait_for_primary(self, n: _Noted, s: RerunSettings) -> RolePolicy | None:
        """The role's policy once a tier-0 route is restored, or None past the window."""
        deadline = n.served_at + s.window_s
        while True:
            now = workflow.now().timestamp()
            ctx: RoleContext = await workflow.execute_local_activity_method(
                RoleContextActivities.role_context,
                RoleContextInput(role=n.role, now=now, newest_observation=True),
                start_to_close_timeout=ROLE_CONTEXT_TIMEOUT,
                retry_policy=LOCAL_ACTIVITY_RETRY,
                summary=f"{n.step}: is {n.role}'s primary back?",
            )
            if primary_restored(ctx.role, ctx.snapshot, now) is not None:
                return ctx.role
            if now + s.check_interval_s > deadline:
                return None
            await workflow.sleep(
                timedelta(seconds=s.check_interval_s),
                summary=f"{n.step}: wait for {n.role}'s primary before re-running",
            )


def _done(base: StepRevision, **update: object) -> StepRevision:
    return base.model_copy(update={**update, "at": workflow.now().timestamp()})
