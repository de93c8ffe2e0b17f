"""On-call notifications of a workflow's escalations, from workflow code.

:class:`EscalationNotifications` starts the ``notify_escalation`` activity when an
escalation opens and when it is resolved (or times out), without waiting for it: a
webhook that is down must neither hold the run nor fail it. Each notification's outcome
(delivered, skipped because no URL is configured, or failed after Temporal's retries) is
recorded in :attr:`EscalationNotifications.records`, which the pipeline shows in its
``status`` query and its result. Before the run ends, :meth:`flush` gives notifications
still being retried up to :data:`FLUSH_S` to finish, then cancels them and records that.
Deterministic workflow code.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.notify import (
        NON_RETRYABLE_WEBHOOK_ERRORS,
        WEBHOOK_TIMEOUT_S,
        EscalationNotifier,
    )
    from agent_failover.resilience.limits import clip
    from agent_failover.resilience.notify import (
        ALL_OPTIONS,
        MAX_STEPS,
        MAX_TEXT,
        OPENED,
        RESOLVED,
        SAGA_OPTIONS,
        EscalationNotice,
        NoticeDecision,
        NoticeStep,
        NotifyResult,
    )
    from agent_failover.workflows.models import BlockedStep, EscalationDecision

#: Temporal retries a failing webhook with backoff for up to this long per notification.
NOTIFY_DEADLINE = timedelta(minutes=10)
NOTIFY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=12,
    non_retryable_error_types=list(NON_RETRYABLE_WEBHOOK_ERRORS),
)
#: Seconds a finished run waits for notifications still being retried.
FLUSH_S = 30.0
#: Role of a blocked compensation (``provide_output`` does not apply to it).
SAGA_ROLE = "saga"


class EscalationNotifications:
    """Fire-and-record notifications of one workflow's escalation rounds."""

    def __init__(self) -> None:
        self.records: list[NotifyResult] = []
        self._tasks: list[asyncio.Task[None]] = []

    def send(
        self,
        event: str,
        round_no: int,
        blocked: list[BlockedStep],
        *,
        timeout_s: float | None,
        timeout_action: str | None,
        decision: EscalationDecision | None = None,
    ) -> None:
        """Start notifying ``event`` (opened/resolved) of round ``round_no``; returns at once."""
        notice = _notice(event, round_no, blocked, timeout_s, timeout_action, decision)
        handle = workflow.start_activity_method(
            EscalationNotifier.notify,
            notice,
            start_to_close_timeout=timedelta(seconds=WEBHOOK_TIMEOUT_S + 5),
            schedule_to_close_timeout=NOTIFY_DEADLINE,
            retry_policy=NOTIFY_RETRY,
            summary=f"notify on-call: {notice.event} (round {round_no})",
        )
        self._tasks.append(asyncio.create_task(self._record(handle, notice)))

    async def flush(self) -> None:
        """Let pending notifications finish (bounded by :data:`FLUSH_S`), then cancel them."""
        if all(t.done() for t in self._tasks):
            return
        try:
            await workflow.wait_condition(
                lambda: all(t.done() for t in self._tasks),
                timeout=timedelta(seconds=FLUSH_S),
                timeout_summary="wait for on-call notifications before ending",
            )
        except TimeoutError:
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _record(self, handle: asyncio.Task[NotifyResult], notice: EscalationNotice) -> None:
        try:
            result = await handle
        except ActivityError as exc:
            cause = exc.cause
            why = (
                f"{cause.type}: {cause.message}"
                if isinstance(cause, ApplicationError)
                else str(cause or exc)
            )
            result = _failed(notice, clip(why, 300))
            workflow.logger.warning("on-call notification %s failed: %s", notice.event, why)
        except asyncio.CancelledError:
            result = _failed(notice, "still being retried when the run ended: cancelled")
        self.records.append(result.model_copy(update={"round": notice.round}))


def _failed(notice: EscalationNotice, detail: str) -> NotifyResult:
    return NotifyResult(event=notice.event, round=notice.round, delivered=False, detail=detail)


def _notice(
    event: str,
    round_no: int,
    blocked: list[BlockedStep],
    timeout_s: float | None,
    timeout_action: str | None,
    decision: EscalationDecision | None,
) -> EscalationNotice:
    info = workflow.info()
    resolved = event == "resolved"
    saga = any(b.role == SAGA_ROLE for b in blocked)
    return EscalationNotice(
        event=RESOLVED if resolved else OPENED,
        namespace=info.namespace,
        workflow_id=info.workflow_id,
        run_id=info.run_id,
        workflow_type=info.workflow_type,
        task_queue=info.task_queue,
        round=round_no,
        occurred_at=workflow.now().timestamp(),
        reason=clip(
            "; ".join(f"{b.step}: {b.reason}" for b in blocked) or "unknown step", MAX_TEXT
        ),
        blocked_steps=[
            NoticeStep(
                step=clip(b.step, MAX_TEXT),
                role=clip(b.role, MAX_TEXT),
                trigger=clip(b.trigger, 100),
                reason=clip(b.reason, MAX_TEXT),
                confidence=b.confidence,
            )
            for b in blocked[:MAX_STEPS]
        ],
        timeout_s=timeout_s,
        timeout_action=timeout_action,
        options=list(SAGA_OPTIONS if saga else ALL_OPTIONS),
        decision=NoticeDecision(
            action=decision.action.value,
            operator=clip(decision.operator, 200),
            note=clip(decision.note, MAX_TEXT),
        )
        if decision is not None
        else None,
        outcome=(decision.action.value if decision else "timed_out") if resolved else None,
    )
