"""The pipeline's side effects as a saga: actions applied after synthesis, and their undo.

With ``options.actions`` the pipeline applies side effects once the answer is known. Each
action is a ``run_tool`` activity keyed by :func:`resilience.saga.idempotency_key`; each
success appends its compensation to the run's log (shared with the agent tools of earlier
steps), and so does an action that failed ambiguously (timeout, retries exhausted: logged
``maybe_applied``, undone by its idempotency key; a 4xx rejection is not logged). A hard
failure undoes the log newest first (``compensate``; a 404 there is "nothing applied", a
success), and a compensation that cannot complete escalates through
:mod:`workflows.pipeline_escalation`. :class:`Actions` does that; :class:`Compensations`
runs the undo itself, and once more, without escalating, when the run is aborted, fails
or is cancelled with side effects still applied. With no actions and no agent tools none
of this runs. Deterministic workflow code.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.models import ToolCallInput, ToolCallResult
    from agent_failover.activities.tools import NON_RETRYABLE_TOOL_ERRORS
    from agent_failover.resilience.contracts import AgentOutput
    from agent_failover.resilience.models import ToolSpec
    from agent_failover.resilience.pipeline import EscalationTrigger
    from agent_failover.resilience.saga import (
        CompensationEntry,
        CompensationLog,
        CompensationStatus,
        SideEffect,
        compensation_for,
        compensation_key,
        idempotency_key,
        render_args,
    )
    from agent_failover.workflows import observe
    from agent_failover.workflows.agent_loop import AgentTool
    from agent_failover.workflows.models import (
        ActionResult,
        ActionSpec,
        ActionStatus,
        AgentToolSpec,
        BlockedStep,
        EscalationAction,
        EscalationDecision,
    )
    from agent_failover.workflows.pipeline_escalation import SAGA, Escalations
    from agent_failover.workflows.pipeline_state import ACTIONS, SYNTHESIS, PipelineState
    from agent_failover.workflows.saga import (
        NOTHING_APPLIED,
        compensation_failed,
        maybe_applied_failure,
    )

#: Retries of one compensation before it escalates (each attempt is idempotent).
COMPENSATION_ATTEMPTS = 3
TOOL_RETRY_INITIAL = timedelta(milliseconds=200)
TOOL_RETRY_MAX = timedelta(seconds=5)
#: How an applied action reads after the saga unwound: undone, or left by an operator.
_UNDO_STATUS = {
    CompensationStatus.COMPENSATED: ActionStatus.COMPENSATED,
    CompensationStatus.LEFT: ActionStatus.LEFT,
}


class Compensations:
    """Runs the undo of the run's logged side effects (``compensate`` activities)."""

    def __init__(self, state: PipelineState) -> None:
        self.state = state
        #: Keys of effects whose undo found nothing to undo (never applied).
        self._nothing: set[str] = set()
        self._unwound = False

    async def undo(self, eff: SideEffect) -> str | None:
        """Run one compensation (its own retries included); the error, or None if undone."""
        assert eff.compensation_tool is not None  # the log only yields undoable effects
        try:
            res = await run_tool(
                "compensate",
                f"{eff.step}/compensate",
                eff.compensation_tool,
                eff.compensation_args,
                compensation_key(eff.idempotency_key, eff.compensation_tool),
                COMPENSATION_ATTEMPTS,
                10.0,
            )
        except ActivityError as exc:
            observe.compensation("failed", eff.step, eff.compensation_tool, cause(exc))
            return cause(exc)
        observe.compensation("run", eff.step, eff.compensation_tool)
        if res.result.get(NOTHING_APPLIED) is True:
            self._nothing.add(eff.idempotency_key)
        return None

    def mark_undone(self, log: CompensationLog, key: str) -> CompensationEntry:
        """Mark the effect ``key`` compensated (nothing applied, if its undo found none)."""
        entry = log.mark_compensated(key, nothing_applied=key in self._nothing)
        return entry.model_copy(deep=True)

    async def unwind(self) -> list[CompensationEntry]:
        """Abort path: try every outstanding undo once more, without escalating again."""
        log = self.state.saga
        if log is None:
            return []
        self._unwound = True
        done: list[CompensationEntry] = []
        for entry in log.to_compensate():
            eff = entry.effect
            error = await self.undo(eff)
            if error is None:
                done.append(self.mark_undone(log, eff.idempotency_key))
            else:
                log.mark_failed(eff.idempotency_key, error)
        return done

    async def unwind_on_failure(self, exc: BaseException) -> None:
        """The run is failing or cancelled: undo what is still applied (shielded), once.

        An abort already unwound; an undo that still fails turns the failure into
        ``COMPENSATION_FAILED`` carrying the entries, so none is dropped silently.
        """
        log = self.state.saga
        if log is None or self._unwound or not log.to_compensate():
            return
        self.state.phase = "compensating"
        workflow.logger.warning("run ending (%s): undoing applied side effects", type(exc).__name__)
        await asyncio.shield(asyncio.ensure_future(self.unwind()))
        failed = log.with_status(CompensationStatus.FAILED)
        if failed:
            raise compensation_failed(failed) from exc


class Actions:
    """The actions after synthesis: applied once each, undone in reverse after a hard failure."""

    def __init__(self, state: PipelineState, undo: Compensations, escalations: Escalations) -> None:
        self.state = state
        self._undo = undo
        self._escalations = escalations

    async def apply(
        self, specs: list[ActionSpec], answer: str, synth: AgentOutput
    ) -> tuple[list[ActionResult], list[CompensationEntry]]:
        """Apply each action once (keyed); on a hard failure undo the applied ones in reverse."""
        if not specs:
            return [], []
        self.state.done_stage(SYNTHESIS)
        self.state.phase = ACTIONS
        wid = workflow.info().workflow_id
        # Effects of agent tools (earlier steps) share the log: a failure here undoes them too.
        log = self.state.saga = self.state.saga or CompensationLog()
        results: list[ActionResult] = []
        for i, spec in enumerate(specs):
            step = f"action#{i + 1}"
            # The key covers the declared args, not the answer: a re-run of this workflow
            # id maps onto the effect already applied even if the answer changed.
            key = idempotency_key(wid, step, spec.tool, spec.args)
            if results and results[-1].status in (ActionStatus.FAILED, ActionStatus.SKIPPED):
                skipped = ActionStatus.SKIPPED
                results.append(
                    ActionResult(step=step, tool=spec.tool, idempotency_key=key, status=skipped)
                )
                continue
            results.append(await self._apply_one(spec, step, key, answer, log))
        compensated: list[CompensationEntry] = []
        if any(r.status is ActionStatus.FAILED for r in results):
            compensated = await self._compensate(log, synth)
            results = _with_undo_status(results, log)
        self.state.done_stage(ACTIONS)
        return results, compensated

    async def _apply_one(
        self, spec: ActionSpec, step: str, key: str, answer: str, log: CompensationLog
    ) -> ActionResult:
        """Run one action; log its undo (or, after an ambiguous failure, its maybe-undo)."""
        args = render_args(spec.args, spec.answer_arg, answer)
        try:
            res = await run_tool(
                "run_tool", step, spec.tool, args, key, spec.max_attempts, spec.timeout_s
            )
        except ActivityError as exc:
            _log_maybe_applied(log, spec, step, args, key, exc)
            return ActionResult(
                step=step,
                tool=spec.tool,
                idempotency_key=key,
                status=ActionStatus.FAILED,
                error=cause(exc),
            )
        comp_tool, comp_args = compensation_for(
            spec.tool, spec.compensation, res.result, spec.compensation_args
        )
        if comp_tool is not None:
            log.append(
                SideEffect(
                    step=step,
                    tool=spec.tool,
                    args=args,
                    idempotency_key=key,
                    compensation_tool=comp_tool,
                    compensation_args=comp_args,
                    result=res.result,
                )
            )
        return ActionResult(
            step=step,
            tool=spec.tool,
            idempotency_key=key,
            status=ActionStatus.APPLIED,
            result=res.result,
            replayed=res.replayed,
        )

    async def _compensate(
        self, log: CompensationLog, synth: AgentOutput
    ) -> list[CompensationEntry]:
        """Undo the log newest first; an undo that cannot complete escalates.

        An acceptance given here (by a human or the timeout action) leaves this and every
        later failing undo in place; an acceptance of degraded *answers* earlier in the run
        does not: leaving a side effect is a separate decision.
        """
        done: list[CompensationEntry] = []
        leave_rest = False
        for entry in log.to_compensate():
            eff = entry.effect
            while True:
                error = await self._undo.undo(eff)
                if error is None:
                    done.append(self._undo.mark_undone(log, eff.idempotency_key))
                    break
                log.mark_failed(eff.idempotency_key, error)
                if leave_rest:
                    log.mark_left(eff.idempotency_key)
                    break
                decision = await self._escalate_undo(eff, error, synth)
                if decision.action is EscalationAction.RETRY:
                    continue
                # accept_degraded, provide_output or an accepting timeout: the effect stays.
                leave_rest = decision.action is EscalationAction.ACCEPT_DEGRADED
                log.mark_left(eff.idempotency_key)
                break
        return done

    async def _escalate_undo(
        self, eff: SideEffect, error: str, synth: AgentOutput
    ) -> EscalationDecision:
        step = f"{eff.step}/compensate"
        reason = (
            f"compensation {eff.compensation_tool} of {eff.step} ({eff.tool}) "
            f"could not complete: {error}"
        )
        blocked = BlockedStep(
            step=step,
            role=SAGA,
            trigger=EscalationTrigger.COMPENSATION_FAILED.value,
            reason=reason,
        )
        decision = await self._escalations.escalate(blocked, synth)
        if decision.action is EscalationAction.ABORT:
            await self._escalations.abort(decision, step)
        return decision


def tool_retry(max_attempts: int) -> RetryPolicy:
    """The retry policy of a tool-server call (``run_tool`` or ``compensate``)."""
    return RetryPolicy(
        initial_interval=TOOL_RETRY_INITIAL,
        backoff_coefficient=2.0,
        maximum_interval=TOOL_RETRY_MAX,
        maximum_attempts=max_attempts,
        non_retryable_error_types=list(NON_RETRYABLE_TOOL_ERRORS),
    )


async def run_tool(
    activity: str,
    step: str,
    tool: str,
    args: dict[str, Any],
    key: str,
    max_attempts: int,
    timeout_s: float,
) -> ToolCallResult:
    """One tool-server call (``activity`` is ``run_tool`` or ``compensate``), keyed by ``key``."""
    return await workflow.execute_activity(
        activity,
        ToolCallInput(tool=tool, args=args, idempotency_key=key, step=step, timeout_s=timeout_s),
        result_type=ToolCallResult,
        # The HTTP timeout fires first; this only bounds a stuck worker.
        start_to_close_timeout=timedelta(seconds=timeout_s + 5),
        retry_policy=tool_retry(max_attempts),
        summary=f"{step}: {tool}",
    )


def agent_tool(spec: AgentToolSpec) -> AgentTool:
    """A tool-server tool for the agent loop: ``run_tool``, undone through ``compensate``."""
    undo, _ = compensation_for(spec.name, spec.compensation, {}, {})
    return AgentTool(
        spec=ToolSpec(name=spec.name, description=spec.description, parameters=spec.parameters),
        activity="run_tool",
        compensation="compensate" if undo else None,
        undo_tool=undo,
        retry_policy=tool_retry(spec.max_attempts),
        timeout=timedelta(seconds=spec.timeout_s),
        compensation_retry_policy=tool_retry(COMPENSATION_ATTEMPTS),
    )


def cause(exc: ActivityError) -> str:
    """``type: message`` of the failure behind an activity error."""
    why = exc.cause
    if isinstance(why, ApplicationError):
        return f"{why.type}: {why.message}"
    return f"{type(why).__name__}: {why}" if why else str(exc)


def _with_undo_status(results: list[ActionResult], log: CompensationLog) -> list[ActionResult]:
    """The actions' results with the outcome of their undo (an action that itself failed
    keeps ``failed``: its maybe-applied entry is not its status)."""
    undone = {
        e.effect.idempotency_key: _UNDO_STATUS[e.status]
        for e in log.entries
        if e.status in _UNDO_STATUS and not e.maybe_applied  # that action failed
    }
    return [
        r.model_copy(update={"status": undone[r.idempotency_key]})
        if r.idempotency_key in undone
        else r
        for r in results
    ]


def _log_maybe_applied(
    log: CompensationLog,
    spec: ActionSpec,
    step: str,
    args: dict[str, Any],
    key: str,
    exc: ActivityError,
) -> None:
    """An action failed ambiguously: log its undo as ``maybe_applied``, keyed by ``key``.

    A non-retryable rejection (a 4xx validation error) declares "not applied": no entry.
    """
    if not maybe_applied_failure(exc, NON_RETRYABLE_TOOL_ERRORS):
        return
    comp_tool, comp_args = compensation_for(
        spec.tool, spec.compensation, {}, spec.compensation_args, effect_key=key
    )
    if comp_tool is None:
        return
    effect = SideEffect(
        step=step,
        tool=spec.tool,
        args=args,
        idempotency_key=key,
        compensation_tool=comp_tool,
        compensation_args=comp_args,
    )
    log.append(effect, maybe_applied=True)
