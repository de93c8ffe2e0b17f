"""A run's one human escalation: every blocked step joins it, one decision answers.

A pipeline whose critical steps keep failing used to pause once per step (planner, each
critic round, synthesis), each pause waiting out its own timeout: an hour of nobody
answering before a run ended. Here a blocked step *joins* the escalation that is open, or
opens one; every step blocked at that moment waits for the same decision, and the timeout
runs from when it opened. After the decision:

* ``accept_degraded`` stands for the rest of the run: later blocked steps are accepted
  under the same escalation without pausing again (so does a timeout whose action is
  ``accept_degraded``);
* ``retry`` / ``provide_output`` answer the steps that were blocked; a later step that
  blocks re-opens the escalation, because a human is evidently there to answer;
* a timeout whose action is ``fail`` or ``abort`` ends the run (the pipeline decides how),
  so at most one timeout is ever waited out.

Given :class:`workflows.notify.EscalationNotifications`, the desk notifies on-call when a
round opens and when it closes (decision or timeout), without waiting for the webhook.

Deterministic workflow code (workflow time only), behind :mod:`workflows.escalate` (any
workflow's ``escalate``) and the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.workflows import observe
    from agent_failover.workflows.models import (
        BlockedStep,
        EscalationAction,
        EscalationDecision,
        EscalationState,
        PendingEscalation,
    )
    from agent_failover.workflows.notify import EscalationNotifications

#: Operator name on the decision a timeout with ``accept_degraded`` stands in for.
TIMEOUT_OPERATOR = "escalation-timeout"


class EscalationDesk:
    """Rounds of one escalation: open, joined by blocked steps, closed by one decision.

    ``snapshot(blocked)`` builds the serialized pipeline state for the ``status`` query;
    ``on_change()`` publishes the state (search attributes) whenever it moves.
    """

    def __init__(
        self,
        snapshot: Callable[[list[BlockedStep]], PendingEscalation],
        on_change: Callable[[], None],
        notifications: EscalationNotifications | None = None,
    ) -> None:
        self.state = EscalationState.NONE
        self.pending: PendingEscalation | None = None
        #: An ``accept_degraded`` (a human's, or the timeout's) covering later blocked steps.
        self.standing: EscalationDecision | None = None
        self.rounds = 0
        self._closed = 0
        self._decisions: dict[int, EscalationDecision | None] = {}
        self._blocked: list[BlockedStep] = []
        self._opened_at = 0.0
        self._timeout_s: float | None = None
        self._timeout_action: str | None = None
        self._snapshot = snapshot
        self._on_change = on_change
        self.notifications = notifications

    @property
    def open(self) -> bool:
        return self.state is EscalationState.PENDING

    @property
    def decided(self) -> bool:
        """The open round already has its decision (it closes at the next wake-up)."""
        return self.rounds in self._decisions

    def resolve(self, decision: EscalationDecision) -> bool:
        """A human's decision for the open round; False (ignored) when nothing is pending."""
        if not self.open or self.rounds in self._decisions:
            return False
        self._decisions[self.rounds] = decision
        return True

    async def wait(self, blocked: BlockedStep, timeout_s: float) -> EscalationDecision | None:
        """Join (or open) the escalation with ``blocked``; the decision, or None on timeout."""
        opening = not self.open
        if opening:
            self.rounds += 1
            self._blocked = []
            self._opened_at = workflow.now().timestamp()
            self.state = EscalationState.PENDING
        self._blocked.append(blocked)
        observe.escalation("opened", blocked.step, blocked.role, blocked.reason)
        self.pending = self._snapshot(list(self._blocked)).model_copy(
            update={"opened_at": self._opened_at, "timeout_s": timeout_s}
        )
        self._timeout_s = timeout_s
        action = self.pending.timeout_action
        self._timeout_action = action.value if action is not None else None
        self._on_change()
        if opening:
            self._notify("opened", self.rounds, None)
        workflow.logger.warning(
            "%s escalated (round %d): %s blocked; waiting for a decision",
            workflow.info().workflow_type,
            self.rounds,
            ", ".join(b.step for b in self._blocked),
        )
        round_no = self.rounds
        left = max(self._opened_at + timeout_s - workflow.now().timestamp(), 0.0)
        try:
            await workflow.wait_condition(
                lambda: round_no in self._decisions,
                timeout=timedelta(seconds=left),
                timeout_summary=f"escalation round {round_no}: wait {left:.0f}s for a human",
            )
        except TimeoutError:
            self._decisions.setdefault(round_no, None)
        decision = self._decisions[round_no]
        outcome = "timed out" if decision is None else decision.action.value
        observe.escalation("resolved", blocked.step, blocked.role, outcome)
        self._close(round_no, decision)
        return decision

    def blocked(self) -> list[BlockedStep]:
        """The steps of the latest round (still listed after it closed, for the reason)."""
        return list(self._blocked)

    def stand(self, decision: EscalationDecision) -> None:
        """Let ``decision`` (an acceptance) cover every later blocked step."""
        self.standing = decision

    def timeout_decision(self, note: str) -> EscalationDecision:
        """The acceptance a timeout with action ``accept_degraded`` stands in for."""
        return EscalationDecision(
            action=EscalationAction.ACCEPT_DEGRADED, operator=TIMEOUT_OPERATOR, note=note
        )

    def _close(self, round_no: int, decision: EscalationDecision | None) -> None:
        if self._closed >= round_no:
            return  # another step of the same round already closed it
        self._closed = round_no
        self.state = EscalationState.TIMED_OUT if decision is None else EscalationState.RESOLVED
        self.pending = None
        if decision is not None and decision.action is EscalationAction.ACCEPT_DEGRADED:
            self.stand(decision)
        self._on_change()
        self._notify("resolved", round_no, decision)

    def _notify(self, event: str, round_no: int, decision: EscalationDecision | None) -> None:
        if self.notifications is None:
            return
        self.notifications.send(
            event,
            round_no,
            list(self._blocked),
            timeout_s=self._timeout_s,
            timeout_action=self._timeout_action,
            decision=decision,
        )

    def mark(self, state: EscalationState) -> None:
        """Record a terminal state (aborted) and publish it."""
        self.state = state
        self.pending = None
        self._on_change()
