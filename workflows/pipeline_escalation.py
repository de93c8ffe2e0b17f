"""The pipeline's pauses for a human, through the escalation any workflow uses.

A step blocks when its critical role could only be answered by its static fallback, from
the response cache (every model tier down) or below its ``min_confidence``, when a
compensation cannot complete, or when a degraded re-run disagrees with the degraded
answer. :class:`Escalations` is :class:`workflows.escalate.WorkflowEscalation` (one
escalation per run, which every blocked step joins; the ``resolve`` update's checks; the
end of the run on ``abort`` or a timeout) with the pipeline's parts: its desk and the
serialized pipeline state on it, the timeout settings of the run's options, the saga's
undo, the run's phase, and the re-run that disagrees. Deterministic workflow code.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.contracts import AgentOutput
    from agent_failover.resilience.shadow import StepRevision
    from agent_failover.workflows.escalate import (
        ABORTED,
        ESCALATION_TIMED_OUT,
        RERUN_DISAGREED,
        SAGA,
        Unwind,
        WorkflowEscalation,
        accepted,
        human_output,
    )
    from agent_failover.workflows.models import (
        BlockedStep,
        EscalationAction,
        EscalationTimeoutAction,
    )
    from agent_failover.workflows.pipeline_state import PipelineState

__all__ = [
    "ABORTED",
    "ESCALATION_TIMED_OUT",
    "RERUN_DISAGREED",
    "SAGA",
    "Escalations",
    "accepted",
    "human_output",
]


class Escalations(WorkflowEscalation):
    """The pipeline's escalation: its state's desk, options, saga undo and phase."""

    kind = "pipeline"

    def __init__(self, state: PipelineState, unwind: Unwind) -> None:
        super().__init__(state.desk, unwind=unwind)
        self.state = state

    @property
    def timeout_s(self) -> float:
        return self.state.opts.escalation_timeout_s

    @property
    def timeout_action(self) -> EscalationTimeoutAction:
        return self.state.opts.escalation_timeout_action

    def phase(self) -> str:
        return self.state.phase

    def not_undone(self) -> list[dict[str, Any]]:
        return self.state.not_undone()

    def _opened(self, blocked: BlockedStep, out: AgentOutput) -> None:
        self.state.opened_by = (blocked.step, blocked.role, blocked.reason, out)

    async def rerun_disagreed(self, rev: StepRevision) -> StepRevision:
        """A re-run that disagrees materially: a human decides which answer stands."""
        assert rev.revised is not None
        standing = self.desk.standing
        if standing is not None:
            # An acceptance of degraded answers already stands for this run.
            return rev.model_copy(update={"decision": standing.action.value})
        blocked = BlockedStep(
            step=f"{rev.step}/rerun",
            role=rev.role,
            trigger=RERUN_DISAGREED,
            reason=(
                f"re-run on the restored primary disagrees with the degraded answer "
                f"(agreement {rev.agreement or 0.0:.2f}): {rev.detail}"
            ),
            confidence=rev.revised.confidence,
        )
        decision = await self.escalate(blocked, rev.revised)
        if decision.action is EscalationAction.ABORT:
            await self.abort(decision, blocked.step)
        update: dict[str, Any] = {"decision": decision.action.value}
        if decision.action is EscalationAction.PROVIDE_OUTPUT:
            update["revised"] = human_output(rev.role, decision, rev.revised)
        return rev.model_copy(update=update)
