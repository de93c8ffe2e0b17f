"""The pipeline's pauses for a human: open or join the escalation, apply its decision.

A step blocks when its critical role could only be answered by its static fallback or
below its ``min_confidence``, when a compensation cannot complete, or when a degraded
re-run disagrees with the degraded answer. :class:`Escalations` hands the blocked step to
the run's :class:`workflows.escalation.EscalationDesk` (one escalation per run, which
every blocked step joins; the run's state serialized for the human) and turns what comes
back into the run's next move: the decision; an acceptance standing in for a timeout
whose action is ``accept_degraded``; or the end of the run, failing with the reason
(timeout action ``fail``) or undoing the applied side effects first (an operator's
``abort``, timeout action ``abort``). It also checks a decision before the ``resolve``
update accepts it (refusing one that does not apply, so it never reaches history) and
answers that update with a receipt. Deterministic workflow code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from agent_failover.providers.validate import parse_json_output
    from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode
    from agent_failover.resilience.saga import CompensationEntry
    from agent_failover.resilience.shadow import StepRevision
    from agent_failover.workflows.models import (
        BlockedStep,
        EscalationAction,
        EscalationDecision,
        EscalationReceipt,
        EscalationState,
        EscalationTimeoutAction,
    )
    from agent_failover.workflows.pipeline_state import PipelineState

ABORTED = "aborted_by_operator"
#: The run ended because nobody answered its escalation (timeout action fail or abort).
ESCALATION_TIMED_OUT = "escalation_timed_out"
#: Escalation role of a compensation that cannot complete.
SAGA = "saga"
#: Escalation trigger of a degraded re-run that disagrees with the degraded answer.
RERUN_DISAGREED = "rerun_disagreed"

#: Undo every side effect still applied (once more); the entries undone.
Unwind = Callable[[], Awaitable[list[CompensationEntry]]]


class Escalations:
    """Blocked steps of one run, through its escalation desk, to the run's next move."""

    def __init__(self, state: PipelineState, unwind: Unwind) -> None:
        self.state = state
        self._unwind = unwind

    async def escalate(self, blocked: BlockedStep, out: AgentOutput) -> EscalationDecision:
        """Join (or open) the pipeline's escalation; apply the timeout action if nobody answers."""
        desk, opts = self.state.desk, self.state.opts
        if not desk.open:
            self.state.opened_by = (blocked.step, blocked.role, blocked.reason, out)
        decision = await desk.wait(blocked, opts.escalation_timeout_s)
        if decision is not None:
            return decision
        action = opts.escalation_timeout_action
        if action is EscalationTimeoutAction.ACCEPT_DEGRADED:
            accept = desk.timeout_decision(
                f"no decision within {opts.escalation_timeout_s:g}s; policy accepts degraded"
            )
            desk.stand(accept)
            return accept
        await self._end_on_timeout(action, opts.escalation_timeout_s)

    async def abort(self, decision: EscalationDecision, step: str) -> NoReturn:
        """An operator's abort: undo every applied side effect, then fail the run."""
        undone = await self._unwind()
        self.state.desk.mark(EscalationState.ABORTED)
        tail = f"; {len(undone)} side effect(s) compensated" if undone else ""
        await self.state.flush_notifications()
        raise ApplicationError(
            f"pipeline aborted by {decision.operator} at step {step}: {decision.note}{tail}",
            {
                "compensated": [e.effect.step for e in undone],
                "not_compensated": self.state.not_undone(),
            },
            type=ABORTED,
            non_retryable=True,
        )

    async def rerun_disagreed(self, rev: StepRevision) -> StepRevision:
        """A re-run that disagrees materially: a human decides which answer stands."""
        assert rev.revised is not None
        standing = self.state.desk.standing
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

    def check(self, decision: EscalationDecision) -> None:
        """Raise ``ValueError`` (the ``resolve`` update refuses it) unless ``decision`` applies."""
        desk = self.state.desk
        if not desk.open or desk.pending is None:
            raise ValueError(
                f"not waiting for a decision (escalation {desk.state.value}, "
                f"phase {self.state.phase})"
            )
        if desk.decided:
            raise ValueError("this escalation already has a decision")
        blocked = desk.blocked()
        if decision.action is EscalationAction.RETRY and any(
            b.trigger == RERUN_DISAGREED for b in blocked
        ):
            raise ValueError(
                "retry does not apply to a re-run that disagrees; use accept_degraded (keep "
                "the degraded answer), provide_output or abort"
            )
        if decision.action is EscalationAction.PROVIDE_OUTPUT:
            if any(b.role == SAGA for b in blocked):
                raise ValueError(
                    "provide_output does not apply to a failed compensation; "
                    "use retry, accept_degraded or abort"
                )
            if not decision.output:
                raise ValueError("provide_output needs the output text")

    def resolve(self, decision: EscalationDecision) -> EscalationReceipt:
        """Hand a checked decision to the desk; the receipt naming what it answers."""
        desk = self.state.desk
        pending = desk.pending  # the validator made sure there is one
        desk.resolve(decision)
        return EscalationReceipt(
            workflow_id=workflow.info().workflow_id,
            step=", ".join(b.step for b in desk.blocked()) or (pending.step if pending else ""),
            role=pending.role if pending else "",
            action=decision.action,
        )

    async def _end_on_timeout(self, action: EscalationTimeoutAction, timeout_s: float) -> NoReturn:
        """Fail the run with the reason; with ``abort``, undo applied side effects first."""
        blocked = self.state.desk.blocked()
        what = "; ".join(f"{b.step}: {b.reason}" for b in blocked) or "unknown step"
        undone: list[CompensationEntry] = []
        if action is EscalationTimeoutAction.ABORT:
            undone = await self._unwind()
        tail = f"; aborted, {len(undone)} side effect(s) compensated" if undone else ""
        await self.state.flush_notifications()
        raise ApplicationError(
            f"escalation timed out after {timeout_s:g}s with no decision ({action.value}); "
            f"blocked: {what}{tail}",
            {
                "action": action.value,
                "blocked_steps": [b.model_dump(mode="json") for b in blocked],
                "compensated": [e.effect.step for e in undone],
                "not_compensated": self.state.not_undone(),
            },
            type=ESCALATION_TIMED_OUT,
            non_retryable=True,
        )


def accepted(out: AgentOutput) -> AgentOutput:
    """``out`` kept as it is, marked as escalated and accepted degraded."""
    codes = [*out.reason_codes, ReasonCode.ESCALATED, ReasonCode.ACCEPTED_DEGRADED]
    return out.model_copy(update={"reason_codes": list(dict.fromkeys(codes))})


def human_output(role: str, decision: EscalationDecision, out: AgentOutput) -> AgentOutput:
    """A human's answer for a blocked step (JSON answers also fill ``data``)."""
    text = decision.output or ""
    try:
        data = parse_json_output(text)
    except (ValueError, RecursionError):
        data = None
    return AgentOutput(
        role=role,
        content=text,
        data=data,
        capability=Capability.FULL,
        tier=0,
        route="human",
        model=f"operator:{decision.operator}",
        reason_codes=[ReasonCode.HUMAN_PROVIDED, ReasonCode.ESCALATED],
        confidence=1.0,
        attempts=out.attempts,
    )
