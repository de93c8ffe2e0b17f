"""What one pipeline run knows about itself, and how it shows it.

:class:`PipelineState` holds the run's record: its phase and pending stages, the steps
finished so far (each with the answer that stands), the role settings read at the start,
the saga's compensation log, the escalation desk and the degraded steps to re-run. Every
other part of the pipeline (:mod:`workflows.pipeline_stages`, :mod:`workflows.pipeline_saga`,
:mod:`workflows.pipeline_escalation`) reads and writes it; the workflow's queries read it.
It publishes the run as it goes: search attributes (FailoverCount, WorstTier, Degraded,
EscalationState, RevisionState), the current details, and the serialized state a human
sees when the run pauses for them. Deterministic workflow code.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.contracts import AgentOutput, AttemptRecord, ReasonCode
    from agent_failover.resilience.notify import NotifyResult
    from agent_failover.resilience.pipeline import FailoverSummary, is_section_degraded, summarize
    from agent_failover.resilience.saga import CompensationLog, CompensationStatus
    from agent_failover.workflows.escalation import EscalationDesk
    from agent_failover.workflows.models import (
        BlockedStep,
        PendingEscalation,
        PipelineOptions,
        PipelineStatus,
        Section,
        StepResult,
    )
    from agent_failover.workflows.notify import EscalationNotifications
    from agent_failover.workflows.rerun import DegradedReruns
    from agent_failover.workflows.search_attributes import (
        REVISION_STATE,
        set_failover_details,
        upsert_failover_search_attributes,
        upsert_if_available,
    )

#: Stage names (the ``status`` query's pending steps). The planner, critic and synthesis
#: stages are answered by the roles of the same name; specialists are every other role.
PLANNER, SPECIALISTS, CRITIC, SYNTHESIS, ACTIONS = (
    "planner",
    "specialists",
    "critic",
    "synthesis",
    "actions",
)


class PipelineState:
    """The record of one run: phase, finished steps, saga log, escalation desk, re-runs."""

    def __init__(self) -> None:
        self.phase = "starting"
        self.steps: list[StepResult] = []
        self.pending: list[str] = []
        self.critical: set[str] = set()
        self.min_confidence: dict[str, float] = {}
        self.opts = PipelineOptions()
        #: The side effects applied so far (agent tools and actions share it).
        self.saga: CompensationLog | None = None
        self.desk = EscalationDesk(self.snapshot, self.upsert, EscalationNotifications())
        #: The step that opened the current escalation: (step, role, reason, its output).
        self.opened_by: tuple[str, str, str, AgentOutput] | None = None
        self.reruns = DegradedReruns({})

    def done_stage(self, stage: str) -> None:
        """``stage`` is no longer pending."""
        if stage in self.pending:
            self.pending.remove(stage)

    def record(self, name: str, out: AgentOutput) -> None:
        """A step finished with ``out``: keep it and publish the run's new state."""
        self.steps.append(StepResult(step=name, output=out))
        self.upsert()

    def summary(self) -> FailoverSummary:
        """Failovers and degradation over the steps finished so far."""
        return summarize([(s.step, s.output) for s in self.steps])

    def upstream_reasons(self) -> list[ReasonCode]:
        """What a later step inherits: ``upstream_degraded`` once any step degraded."""
        return [ReasonCode.UPSTREAM_DEGRADED] if self.summary().degraded_steps else []

    def history(self) -> dict[str, list[AttemptRecord]]:
        """Every finished step's attempts, by step name."""
        return {s.step: s.output.attempts for s in self.steps}

    def upsert(self) -> None:
        """Publish the failover search attributes and the current details."""
        summary = self.summary()
        upsert_failover_search_attributes(summary, escalation_state=self.desk.state.value)
        self.details(summary)

    def upsert_revisions(self) -> None:
        """Publish the ``RevisionState`` search attribute (the worst re-run outcome)."""
        upsert_if_available([REVISION_STATE.value_set(self.reruns.state())])

    def details(self, summary: FailoverSummary | None = None) -> None:
        """Publish the current details (metadata, not a command: replay never sees them)."""
        set_failover_details(
            [(s.step, s.output) for s in self.steps],
            summary or self.summary(),
            escalation_state=self.desk.state.value,
            phase=self.phase,
        )

    def notifications(self) -> list[NotifyResult]:
        """The on-call notifications sent so far, with their outcome."""
        notes = self.desk.notifications
        return list(notes.records) if notes is not None else []

    async def flush_notifications(self) -> None:
        """Give on-call notifications still in flight a bounded moment before the run ends."""
        if self.desk.notifications is not None:
            await self.desk.notifications.flush()

    def not_undone(self) -> list[dict[str, Any]]:
        """Log entries whose undo failed, for the run's failure details (never dropped)."""
        log = self.saga
        failed = log.with_status(CompensationStatus.FAILED) if log else []
        return [e.model_dump(mode="json") for e in failed]

    def sections(self, sections: list[tuple[str, AgentOutput]]) -> list[Section]:
        """The specialists' sections as the result lists them (degraded, suppressed...)."""
        suppress = self.opts.suppress_degraded_sections
        return [
            Section(
                step=step,
                role=out.role,
                degraded=is_section_degraded(out),
                suppressed=suppress and is_section_degraded(out),
                capability=out.capability.value,
                tier=out.tier,
                reason_codes=[c.value for c in out.reason_codes],
            )
            for step, out in sections
        ]

    def status(self) -> PipelineStatus:
        """The ``status`` query's answer."""
        return PipelineStatus(
            phase=self.phase,
            completed_steps=[s.step for s in self.steps],
            pending_steps=list(self.pending),
            summary=self.summary(),
            escalation=self.desk.state,
            pending_escalation=self.desk.pending,
            compensation_log=self.saga,
            notifications=self.notifications(),
        )

    def snapshot(self, blocked: list[BlockedStep]) -> PendingEscalation:
        """The run's state serialized for the human deciding its escalation."""
        step, role, reason, out = self.opened_by or (blocked[0].step, blocked[0].role, "", None)
        assert out is not None
        return PendingEscalation(
            step=step,
            role=role,
            reason=reason,
            output=out,
            completed_steps=[s.step for s in self.steps],
            pending_steps=list(self.pending),
            failover_history=self.history(),
            compensation_log=self.saga.model_copy(deep=True) if self.saga else None,
            blocked_steps=blocked,
            timeout_action=self.opts.escalation_timeout_action,
        )
