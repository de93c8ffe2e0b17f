"""``AgentPipelineWorkflow``: planner → specialists in parallel → critic → synthesis.

Every agent call goes through :func:`workflows.resilient.resilient_complete`. The
workflow keeps a visible record as it goes: ``status`` and ``failover_history`` queries,
and the search attributes FailoverCount, WorstTier, Degraded and EscalationState, so
"every pipeline that degraded" is one filter in the Temporal UI. When a critical role
can only be answered by its static fallback, or from the response cache (every model
tier down), or answers below its ``min_confidence``, the pipeline pauses for a human with
its state serialized and waits for a decision: one escalation per run, which every
blocked step joins (:mod:`workflows.escalation`). The decision arrives through the
``resolve`` update (the one of any workflow that escalates, :mod:`workflows.escalate`),
whose validator refuses one that does not apply (nothing pending, already decided,
``provide_output`` without text or for a failed compensation) before it reaches history.
Nobody answering within the timeout ends the run the way ``escalation_timeout_action``
says: fail with the reason (default), accept degraded, or abort with compensation. A
static critic never approves: its verdict is ``unreviewed``.

With ``options.actions`` the pipeline then applies side effects as a saga, undone newest
first on a hard failure, an abort, or a run that fails or is cancelled with effects still
applied. Roles with ``rerun`` settings get their degraded steps re-run once their primary
is back (:mod:`workflows.rerun`): after the last stage the run waits (phase ``rerun``) up
to the role's window, records each agreeing re-run as a revised result (``revisions``
query, ``PipelineResult.revisions``, search attribute ``RevisionState``) and escalates a
material disagreement through the same desk (trigger ``rerun_disagreed``). Sampled calls
of roles with ``shadow`` settings are shadow-evaluated (:mod:`workflows.shadow`); the run
makes sure those evaluations started before it returns.

The class holds the run's steps and Temporal's handlers; the work lives in its parts:
:mod:`workflows.pipeline_state` (the run's record and what it publishes),
:mod:`workflows.pipeline_stages` (the stage steps), :mod:`workflows.pipeline_saga` (the
actions and their undo) and :mod:`workflows.pipeline_escalation` (pauses for a human).
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.pipeline import Subtask, dumps_plan
    from agent_failover.resilience.saga import CompensationEntry
    from agent_failover.resilience.shadow import StepRevision
    from agent_failover.workflows.escalate import EscalationHandlers
    from agent_failover.workflows.first_call import plan_in_first_attempt
    from agent_failover.workflows.inputs import workflow_input
    from agent_failover.workflows.models import (
        ActionResult,
        PipelineInput,
        PipelineResult,
        PipelineStatus,
        StepHistory,
    )
    from agent_failover.workflows.pipeline_escalation import Escalations
    from agent_failover.workflows.pipeline_saga import Actions, Compensations
    from agent_failover.workflows.pipeline_stages import Sections, Stages
    from agent_failover.workflows.pipeline_state import PipelineState
    from agent_failover.workflows.shadow import settle_shadows

INVALID_INPUT = "invalid_pipeline_input"


@workflow.defn(name="AgentPipelineWorkflow")
class AgentPipelineWorkflow(EscalationHandlers):
    """The pipeline; its ``resolve`` update and ``escalation`` query are any workflow's
    (:class:`EscalationHandlers`), answered by its own :class:`Escalations`."""

    def __init__(self) -> None:
        self._state = PipelineState()
        self._undo = Compensations(self._state)
        self._escalations = Escalations(self._state, self._undo.unwind)
        self._failover_escalation = self._escalations  # what EscalationHandlers answers with
        self._stages = Stages(self._state, self._escalations)
        self._actions = Actions(self._state, self._undo, self._escalations)

    @workflow.run
    async def run(self, *args: Any) -> PipelineResult:
        # Untyped on purpose (see workflows.inputs): input Temporal cannot decode into a
        # PipelineInput would fail the workflow task forever; here it fails the run at once,
        # naming the bad fields. Callers pass a PipelineInput.
        inp = workflow_input(
            PipelineInput, args, workflow_name="AgentPipelineWorkflow", error_type=INVALID_INPUT
        )
        try:
            return await self._run(inp)
        except (FailureError, asyncio.CancelledError) as exc:
            await self._undo.unwind_on_failure(exc)
            raise

    async def _run(self, inp: PipelineInput) -> PipelineResult:
        self._state.opts = inp.options
        context = [(c.content, c.priority, c.pinned) for c in inp.context]
        stages = self._stages
        # Before the roles' local activity: a patch asked right after one can be asked a
        # workflow task earlier on replay than it ran (first_call.plan_in_first_attempt).
        plan_in_first_attempt()
        roles = await stages.load_roles()
        subtasks = await stages.plan(inp, context, roles.specialists)
        sections = await stages.specialists(inp.task, subtasks, context)
        sections, verdict = await stages.review(inp.task, subtasks, sections, context)
        synth, answer, confidence = await stages.synthesize(inp.task, sections, verdict)
        actions, compensated = await self._actions.apply(inp.options.actions, answer, synth)
        await self._wrap_up()
        return self._result(answer, confidence, sections, verdict, subtasks, actions, compensated)

    async def _wrap_up(self) -> None:
        """Degraded re-runs, pending shadow starts and notifications, before the result."""
        state = self._state
        if state.reruns.noted:
            state.phase = "rerun"
            await state.reruns.run(self._escalations.rerun_disagreed, state.upsert_revisions)
        await settle_shadows()
        state.phase = "done"
        state.pending = []
        await state.flush_notifications()

    def _result(
        self,
        answer: str,
        confidence: float,
        sections: Sections,
        verdict: str | None,
        subtasks: list[Subtask],
        actions: list[ActionResult],
        compensated: list[CompensationEntry],
    ) -> PipelineResult:
        state = self._state
        summary = state.summary()
        state.details(summary)
        return PipelineResult(
            answer=answer,
            confidence=confidence,
            degraded=bool(summary.degraded_steps),
            sections=state.sections(sections),
            steps=list(state.steps),
            summary=summary,
            escalation=state.desk.state,
            critic_verdict=verdict,
            plan=dumps_plan(subtasks),
            actions=actions,
            compensated=compensated,
            compensation_log=state.saga,
            notifications=state.notifications(),
            revisions=list(state.reruns.revisions),
        ).bounded()

    @workflow.query(name="status")
    def status(self) -> PipelineStatus:
        """Phase, finished and pending steps, the escalation and the saga's log."""
        return self._state.status()

    @workflow.query(name="revisions")
    def revisions(self) -> list[StepRevision]:
        """Degraded steps re-run so far: revised, escalated, failed or expired."""
        return list(self._state.reruns.revisions)

    @workflow.query(name="failover_history")
    def failover_history(self) -> list[StepHistory]:
        """Every finished step: who answered, reason codes, attempts with ISO timestamps."""
        return [StepHistory.of(s.step, s.output) for s in self._state.steps]
