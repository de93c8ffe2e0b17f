"""Escalation for any workflow: pause for a human with state, resolve by update, page on-call.

From workflow code, after a step's answer::

    out = await resilient_complete("reviewer", request)
    outcome = await escalate("review", out, state={"ticket": ticket_id})
    out = outcome.output            # unchanged, accepted degraded, or the human's answer

:func:`escalate` decides whether the answer needs a human (its static fallback; an
answer from the response cache, i.e. with every model tier down; confidence below the
role's ``min_confidence``; or a ``reason`` of the workflow's own). If so it opens (or joins)
the run's one escalation: the ``EscalationState`` search attribute goes ``pending``, the
state is kept for the human (the ``escalation`` query; ``failover escalations show``),
on-call is notified (the ``notify_escalation`` activity, when the worker has a webhook
URL) and the step waits for the ``resolve`` update (``failover resolve``). ``abort``
undoes what the run's ``unwind`` says, then fails the run; nobody answering within the
timeout fails it, accepts the degraded answer or aborts, as ``timeout_action`` says.

:class:`EscalationHandlers` is the one-line way to declare the ``resolve`` update and the
``escalation`` query (``class MyWorkflow(EscalationHandlers)``); a workflow without it gets
them registered at its first escalation. The bundled pipeline inherits it too, with its
own :class:`WorkflowEscalation` (its snapshot, settings and undo): one code path.
Deterministic workflow code.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel
    from pydantic_core import to_jsonable_python

    from agent_failover.providers.validate import parse_json_output
    from agent_failover.resilience.config import RolePolicy
    from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode
    from agent_failover.resilience.limits import clip
    from agent_failover.resilience.pipeline import (
        EscalationTrigger,
        escalation_trigger,
        trigger_reason,
    )
    from agent_failover.resilience.saga import CompensationEntry
    from agent_failover.workflows.escalation import EscalationDesk
    from agent_failover.workflows.models import (
        BlockedStep,
        EscalationAction,
        EscalationDecision,
        EscalationOutcome,
        EscalationReceipt,
        EscalationState,
        EscalationStatus,
        EscalationTimeoutAction,
        PendingEscalation,
    )
    from agent_failover.workflows.notify import EscalationNotifications
    from agent_failover.workflows.patches import ESCALATE_CACHED_ANSWER
    from agent_failover.workflows.search_attributes import ESCALATION_STATE, upsert_if_available

__all__ = ["EscalationHandlers", "WorkflowEscalation", "escalate"]

ABORTED = "aborted_by_operator"
#: The run ended because nobody answered its escalation (timeout action fail or abort).
ESCALATION_TIMED_OUT = "escalation_timed_out"
#: Escalation role of a compensation that cannot complete.
SAGA = "saga"
#: Escalation trigger of a degraded re-run that disagrees with the degraded answer.
RERUN_DISAGREED = "rerun_disagreed"
#: Escalation trigger of a workflow's own reason (``escalate(..., reason=...)``).
REQUESTED = "requested"
RESOLVE_UPDATE, ESCALATION_QUERY = "resolve", "escalation"
#: Failure type of a workflow whose ``escalation_settings`` cannot be used.
INVALID_SETTINGS = "invalid_escalation_settings"
DEFAULT_TIMEOUT_S = 900.0
#: Bytes of a workflow's state kept for the human (JSON); more is cut to a preview.
MAX_STATE_BYTES = 64_000
#: Attributes of the workflow instance holding its escalation and its roles' floors.
_ATTR, _FLOORS = "_failover_escalation", "_failover_role_floors"

#: Undo every side effect still applied (once more); the entries undone.
Unwind = Callable[[], Awaitable[list[CompensationEntry]]]


class WorkflowEscalation:
    """One run's escalation: its desk, timeout rules, the ``resolve`` update's checks, and
    the end of the run on ``abort`` or when nobody answers."""

    kind = "workflow"

    def __init__(
        self,
        desk: EscalationDesk | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        timeout_action: EscalationTimeoutAction | str = EscalationTimeoutAction.FAIL,
        unwind: Unwind | None = None,
    ) -> None:
        self.desk = desk or EscalationDesk(self._snapshot, self._publish, EscalationNotifications())
        self._timeout_s = timeout_s
        self._timeout_action = EscalationTimeoutAction(timeout_action)
        self._unwind = unwind
        #: The step that opened the current escalation: (step, role, reason, its output).
        self.opened_by: tuple[str, str, str, AgentOutput] | None = None
        #: The workflow's own state as the last ``escalate`` call passed it (JSON).
        self.user_state: Any = None

    # -- settings and hooks (the pipeline overrides them) ----------------------------------
    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @property
    def timeout_action(self) -> EscalationTimeoutAction:
        return self._timeout_action

    def phase(self) -> str:
        """Where the run is, for the human and for a refused decision ('' if unknown)."""
        return ""

    def not_undone(self) -> list[dict[str, Any]]:
        """Side effects whose undo failed, for the run's failure details."""
        return []

    def _snapshot(self, blocked: list[BlockedStep]) -> PendingEscalation:
        step, role, reason, out = self.opened_by or (blocked[0].step, blocked[0].role, "", None)
        assert out is not None
        return PendingEscalation(
            step=step,
            role=role,
            reason=reason,
            output=out,
            completed_steps=[],
            pending_steps=[],
            failover_history={step: list(out.attempts)},
            blocked_steps=blocked,
            timeout_action=self.timeout_action,
            state=self.user_state,
        )

    def _publish(self) -> None:
        upsert_if_available([ESCALATION_STATE.value_set(self.desk.state.value)])

    # -- one step through the escalation ---------------------------------------------------
    async def settle(
        self, step: str, role: str, out: AgentOutput, min_confidence: float, reason: str | None
    ) -> EscalationOutcome:
        """``out`` through the escalation: no trigger, a standing acceptance, or a pause and
        the decision applied (``abort`` ends the run)."""
        trigger = self._trigger(out, min_confidence, reason)
        if trigger is None:
            return EscalationOutcome(output=out)
        standing = self.desk.standing
        if standing is not None:
            # Already accepted for this run (by a human or the timeout action): the one
            # escalation covers this step too, without another pause.
            return EscalationOutcome(output=accepted(out), decision=standing, trigger=trigger)
        why = reason or trigger_reason(EscalationTrigger(trigger), role, out, min_confidence)
        blocked = BlockedStep(
            step=step, role=role, trigger=trigger, reason=clip(why, 500), confidence=out.confidence
        )
        decision = await self.escalate(blocked, out)
        if decision.action is EscalationAction.ABORT:
            await self.abort(decision, step)
        if decision.action is EscalationAction.RETRY:
            answer = out
        elif decision.action is EscalationAction.PROVIDE_OUTPUT:
            answer = human_output(role, decision, out)
        else:
            answer = accepted(out)
        return EscalationOutcome(output=answer, decision=decision, trigger=trigger)

    def _trigger(self, out: AgentOutput, min_confidence: float, reason: str | None) -> str | None:
        trigger = escalation_trigger(out, critical=True, min_confidence=min_confidence)
        if trigger is EscalationTrigger.CACHED_ONLY and not workflow.patched(
            ESCALATE_CACHED_ANSWER
        ):
            trigger = None  # recorded before a cached-only answer escalated
        if trigger is not None:
            return trigger.value
        return REQUESTED if reason else None

    async def escalate(self, blocked: BlockedStep, out: AgentOutput) -> EscalationDecision:
        """Join (or open) the run's escalation; apply the timeout action if nobody answers."""
        desk = self.desk
        if not desk.open:
            self._opened(blocked, out)
        decision = await desk.wait(blocked, self.timeout_s)
        if decision is not None:
            return decision
        action = self.timeout_action
        if action is EscalationTimeoutAction.ACCEPT_DEGRADED:
            accept = desk.timeout_decision(
                f"no decision within {self.timeout_s:g}s; policy accepts degraded"
            )
            desk.stand(accept)
            return accept
        await self._end_on_timeout(action, self.timeout_s)

    def _opened(self, blocked: BlockedStep, out: AgentOutput) -> None:
        self.opened_by = (blocked.step, blocked.role, blocked.reason, out)

    async def flush(self) -> None:
        """Give on-call notifications still in flight a bounded moment before the run ends."""
        if self.desk.notifications is not None:
            await self.desk.notifications.flush()

    async def undo(self) -> list[CompensationEntry]:
        return await self._unwind() if self._unwind is not None else []

    async def abort(self, decision: EscalationDecision, step: str) -> NoReturn:
        """An operator's abort: undo every applied side effect, then fail the run."""
        undone = await self.undo()
        self.desk.mark(EscalationState.ABORTED)
        tail = f"; {len(undone)} side effect(s) compensated" if undone else ""
        await self.flush()
        raise ApplicationError(
            f"{self.kind} aborted by {decision.operator} at step {step}: {decision.note}{tail}",
            {
                "compensated": [e.effect.step for e in undone],
                "not_compensated": self.not_undone(),
            },
            type=ABORTED,
            non_retryable=True,
        )

    async def _end_on_timeout(self, action: EscalationTimeoutAction, timeout_s: float) -> NoReturn:
        """Fail the run with the reason; with ``abort``, undo applied side effects first."""
        blocked = self.desk.blocked()
        what = "; ".join(f"{b.step}: {b.reason}" for b in blocked) or "unknown step"
        undone: list[CompensationEntry] = []
        if action is EscalationTimeoutAction.ABORT:
            undone = await self.undo()
        tail = f"; aborted, {len(undone)} side effect(s) compensated" if undone else ""
        await self.flush()
        raise ApplicationError(
            f"escalation timed out after {timeout_s:g}s with no decision ({action.value}); "
            f"blocked: {what}{tail}",
            {
                "action": action.value,
                "blocked_steps": [b.model_dump(mode="json") for b in blocked],
                "compensated": [e.effect.step for e in undone],
                "not_compensated": self.not_undone(),
            },
            type=ESCALATION_TIMED_OUT,
            non_retryable=True,
        )

    # -- the resolve update and the escalation query ---------------------------------------
    def check(self, decision: EscalationDecision) -> None:
        """Raise ``ValueError`` (the ``resolve`` update refuses it) unless ``decision`` applies."""
        desk = self.desk
        if not desk.open or desk.pending is None:
            phase = self.phase()
            where = f", phase {phase}" if phase else ""
            raise ValueError(f"not waiting for a decision (escalation {desk.state.value}{where})")
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
        desk = self.desk
        pending = desk.pending  # the validator made sure there is one
        desk.resolve(decision)
        return EscalationReceipt(
            workflow_id=workflow.info().workflow_id,
            step=", ".join(b.step for b in desk.blocked()) or (pending.step if pending else ""),
            role=pending.role if pending else "",
            action=decision.action,
        )

    def status(self) -> EscalationStatus:
        """The ``escalation`` query's answer."""
        notes = self.desk.notifications
        return EscalationStatus(
            workflow_type=workflow.info().workflow_type,
            escalation=self.desk.state,
            pending_escalation=self.desk.pending,
            phase=self.phase(),
            notifications=list(notes.records) if notes is not None else [],
        )


def run_escalation(instance: Any) -> WorkflowEscalation:
    """The escalation of the workflow ``instance`` (created at first use)."""
    esc = getattr(instance, _ATTR, None)
    if esc is None:
        settings = getattr(instance, "escalation_settings", {}) or {}
        try:
            esc = WorkflowEscalation(**settings)
        except (TypeError, ValueError) as exc:
            raise ApplicationError(
                f"escalation_settings {settings!r} are invalid ({exc}): use timeout_s, "
                "timeout_action (fail, accept_degraded or abort) and unwind",
                type=INVALID_SETTINGS,
                non_retryable=True,
            ) from None
        setattr(instance, _ATTR, esc)
    return esc


class EscalationHandlers:
    """Mixin: the ``resolve`` update and the ``escalation`` query for :func:`escalate`.

    ``class MyWorkflow(EscalationHandlers)`` (with ``@workflow.defn``) is all it takes;
    ``escalation_settings`` (``timeout_s``, ``timeout_action``, ``unwind``), set as a class
    attribute or in ``__init__`` before the first escalation, changes the defaults (900 s,
    fail). Without the mixin the handlers are registered at the first escalation, so a
    decision sent earlier is refused as an unknown update instead of "not waiting".
    """

    escalation_settings: dict[str, Any] = {}

    @workflow.update(name=RESOLVE_UPDATE)
    def resolve(self, decision: EscalationDecision) -> EscalationReceipt:
        """A human's decision on the open escalation; refused unless it applies."""
        return run_escalation(self).resolve(decision)

    @resolve.validator
    def _decision_applies(self, decision: EscalationDecision) -> None:
        run_escalation(self).check(decision)

    @workflow.query(name=ESCALATION_QUERY)
    def escalation_status(self) -> EscalationStatus:
        """The escalation: state, what is pending (with the run's state), notifications."""
        return run_escalation(self).status()


def _current() -> WorkflowEscalation:
    esc = run_escalation(workflow.instance())
    if workflow.get_update_handler(RESOLVE_UPDATE) is None:
        workflow.set_update_handler(RESOLVE_UPDATE, esc.resolve, validator=esc.check)
    if workflow.get_query_handler(ESCALATION_QUERY) is None:
        workflow.set_query_handler(ESCALATION_QUERY, esc.status)
    return esc


async def escalate(
    step: str,
    output: AgentOutput,
    state: Any = None,
    *,
    min_confidence: float | None = None,
    reason: str | None = None,
) -> EscalationOutcome:
    """Pause for a human if ``output`` cannot be trusted for ``step``; the answer that stands.

    Call it from workflow code for a step that must not go on degraded. It escalates when
    ``output`` is the role's static fallback, came from the response cache (every model
    tier was down), has a confidence below ``min_confidence`` (default: the role's policy
    value, as this run's ``resilient_complete`` read it; else 0), or when ``reason`` is
    given (the workflow's own). ``state`` (a pydantic model or anything JSON-able, cut at
    64 KB) is kept for the human. Returns at once when no human is needed. ``abort``, and a
    timeout whose action is ``fail`` or ``abort``, fail the run (non-retryable
    ``aborted_by_operator`` / ``escalation_timed_out``); ``retry`` comes back with
    ``outcome.retry`` set, for the workflow to run its step again.
    """
    esc = _current()
    if state is not None:
        esc.user_state = _jsonable(state)
    floor = min_confidence
    if floor is None:
        floor = getattr(workflow.instance(), _FLOORS, {}).get(output.role, 0.0)
    return await esc.settle(step, output.role, output, floor, reason)


def note_role(role: RolePolicy) -> None:
    """Remember ``role``'s ``min_confidence`` for this run (``escalate``'s default floor)."""
    instance = workflow.instance()
    floors = getattr(instance, _FLOORS, None)
    if floors is None:
        floors = {}
        try:
            setattr(instance, _FLOORS, floors)
        except AttributeError:  # an instance with __slots__: no default floor
            return
    floors[role.name] = role.min_confidence


def _jsonable(state: Any) -> Any:
    """``state`` as JSON-able data, cut to a preview past :data:`MAX_STATE_BYTES`."""
    data = state.model_dump(mode="json") if isinstance(state, BaseModel) else state
    data = to_jsonable_python(data, fallback=str)
    text = json.dumps(data, sort_keys=True)
    if len(text.encode()) <= MAX_STATE_BYTES:
        return data
    return {"truncated": True, "bytes": len(text.encode()), "preview": clip(text, 2000)}


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
