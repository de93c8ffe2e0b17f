"""``AgentPipelineWorkflow``: planner → specialists in parallel → critic → synthesis.

Every agent call goes through :func:`workflows.resilient.resilient_complete`. The
workflow keeps a visible record as it goes: ``status`` and ``failover_history`` queries,
and the search attributes FailoverCount, WorstTier, Degraded and EscalationState, so
"every pipeline that degraded" is one filter in the Temporal UI. When a critical role
can only be answered by its static fallback, or answers below its ``min_confidence``, the
pipeline pauses for a human with its state serialized and waits for a decision: one
escalation per run, which every blocked step joins (:mod:`workflows.escalation`). The
decision arrives through the ``resolve`` update, whose validator refuses one that does not
apply (nothing pending, already decided, ``provide_output`` without text or for a failed
compensation) before it reaches history; the older ``resolve_escalation`` signal is kept
for running workflows and ignores what does not apply. Nobody answering within the
timeout ends the run the way ``escalation_timeout_action`` says: fail with the reason
(default), accept degraded, or abort with compensation. A static critic never approves:
its verdict is ``unreviewed``.

With ``options.actions`` the pipeline then applies side effects as a saga: each action is a
``run_tool`` activity keyed by :func:`resilience.saga.idempotency_key`; each success
appends its compensation to the log, and so does an action that failed ambiguously
(timeout, retries exhausted: logged ``maybe_applied``, undone by its idempotency key; a
4xx rejection is not logged); a hard failure undoes the log in reverse
(``compensate``; a 404 there is "nothing applied", a success), and a compensation that
cannot complete escalates the same way. With no actions none of this runs, so histories
recorded before it replay unchanged.

Roles with ``rerun`` settings get their degraded steps re-run once their primary is back
(:mod:`workflows.rerun`): after the last stage the run waits (phase ``rerun``) up to the
role's window, records each agreeing re-run as a revised result (``revisions`` query,
``PipelineResult.revisions``, search attribute ``RevisionState``) and escalates a material
disagreement through the same desk (trigger ``rerun_disagreed``). Sampled calls of roles
with ``shadow`` settings are shadow-evaluated (:mod:`workflows.shadow`); the run makes sure
those evaluations started before it returns.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.models import (
        PipelineRoles,
        PipelineRolesInput,
        ToolCallInput,
        ToolCallResult,
    )
    from agent_failover.activities.role_context import RoleContextActivities
    from agent_failover.activities.tools import NON_RETRYABLE_TOOL_ERRORS
    from agent_failover.providers.validate import parse_json_output
    from agent_failover.resilience.contracts import (
        AgentOutput,
        AttemptRecord,
        Capability,
        ReasonCode,
    )
    from agent_failover.resilience.models import ToolSpec
    from agent_failover.resilience.notify import NotifyResult
    from agent_failover.resilience.pipeline import (
        REVISE,
        EscalationTrigger,
        FailoverSummary,
        PlanError,
        Subtask,
        critic_request,
        dumps_plan,
        escalation_trigger,
        final_answer,
        is_section_degraded,
        parse_plan,
        planner_request,
        review_verdict,
        specialist_request,
        summarize,
        synthesis_request,
        trigger_reason,
    )
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
    from agent_failover.resilience.shadow import StepRevision
    from agent_failover.workflows import observe
    from agent_failover.workflows.agent_loop import AgentTool, run_agent_loop
    from agent_failover.workflows.escalation import EscalationDesk
    from agent_failover.workflows.inputs import workflow_input
    from agent_failover.workflows.models import (
        ActionResult,
        ActionSpec,
        ActionStatus,
        AgentToolSpec,
        BlockedStep,
        EscalationAction,
        EscalationDecision,
        EscalationReceipt,
        EscalationState,
        EscalationTimeoutAction,
        PendingEscalation,
        PipelineInput,
        PipelineOptions,
        PipelineResult,
        PipelineStatus,
        Section,
        StepHistory,
        StepResult,
    )
    from agent_failover.workflows.notify import EscalationNotifications
    from agent_failover.workflows.rerun import DegradedReruns
    from agent_failover.workflows.resilient import LOCAL_ACTIVITY_RETRY, resilient_complete
    from agent_failover.workflows.saga import (
        MAYBE_APPLIED_PATCH,
        NOTHING_APPLIED,
        Saga,
        compensation_failed,
        maybe_applied_failure,
    )
    from agent_failover.workflows.search_attributes import (
        REVISION_STATE,
        set_failover_details,
        upsert_failover_search_attributes,
    )
    from agent_failover.workflows.shadow import settle_shadows


#: Roles the pipeline stages use; specialists are every other role in the policy.
PLANNER, CRITIC, SYNTHESIS = "planner", "critic", "synthesis"
INVALID_INPUT = "invalid_pipeline_input"
ABORTED = "aborted_by_operator"
#: The run ended because nobody answered its escalation (timeout action fail or abort).
ESCALATION_TIMED_OUT = "escalation_timed_out"
#: Stage and escalation role of the side-effect saga.
ACTIONS, SAGA = "actions", "saga"
#: Escalation trigger of a degraded re-run that disagrees with the degraded answer.
RERUN_DISAGREED = "rerun_disagreed"
#: Retries of one compensation before it escalates (each attempt is idempotent).
COMPENSATION_ATTEMPTS = 3
TOOL_RETRY_INITIAL = timedelta(milliseconds=200)
TOOL_RETRY_MAX = timedelta(seconds=5)
#: workflow.patched ids of issue 15: a role with ``agent_tools`` runs an agent loop; a run
#: that fails or is cancelled with side effects still applied undoes them first.
AGENT_TOOLS_PATCH = "agent-tools-issue-15"
UNWIND_ON_FAILURE_PATCH = "saga-unwind-on-failure-issue-15"
#: How an applied action reads after the saga unwound: undone, or left by an operator.
_UNDO_STATUS = {
    CompensationStatus.COMPENSATED: ActionStatus.COMPENSATED,
    CompensationStatus.LEFT: ActionStatus.LEFT,
}


@workflow.defn(name="AgentPipelineWorkflow")
class AgentPipelineWorkflow:
    def __init__(self) -> None:
        self._phase = "starting"
        self._steps: list[StepResult] = []
        self._pending: list[str] = []
        self._critical: set[str] = set()
        self._min_confidence: dict[str, float] = {}
        self._saga: CompensationLog | None = None
        #: Keys of effects whose undo found nothing to undo (never applied).
        self._nothing: set[str] = set()
        self._desk = EscalationDesk(
            self._escalation_snapshot, self._upsert, EscalationNotifications()
        )
        self._opened_by: tuple[str, str, str, AgentOutput] | None = None
        self._opts = PipelineOptions()
        self._unwound = False
        self._reruns = DegradedReruns({})

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
            await self._unwind_on_failure(exc)
            raise

    async def _run(self, inp: PipelineInput) -> PipelineResult:
        opts = self._opts = inp.options
        context = [(c.content, c.priority, c.pinned) for c in inp.context]
        roles = await self._load_roles()
        self._critical = set(roles.critical)
        self._min_confidence = dict(roles.min_confidence)
        self._reruns = DegradedReruns(dict(roles.rerun))
        subtasks = await self._plan(inp, context, roles.specialists)
        self._phase = "specialists"
        sections = await self._run_specialists(inp.task, subtasks, context, [], opts)
        self._done_stage("specialists")
        sections, verdict = await self._review(inp.task, subtasks, sections, context)
        self._done_stage(CRITIC)
        self._phase = "synthesis"
        synth = await self._step(
            SYNTHESIS,
            SYNTHESIS,
            synthesis_request(
                inp.task, sections, suppress_degraded=opts.suppress_degraded_sections
            ),
            opts,
        )
        answer, confidence = final_answer(
            synth, sections, suppress_degraded=opts.suppress_degraded_sections, verdict=verdict
        )
        actions: list[ActionResult] = []
        compensated: list[CompensationEntry] = []
        if opts.actions:
            self._done_stage(SYNTHESIS)
            self._phase = ACTIONS
            actions, compensated = await self._apply_actions(opts.actions, answer, synth, opts)
        await self._wrap_up()
        summary = self._summary()
        self._details(summary)
        return PipelineResult(
            answer=answer,
            confidence=confidence,
            degraded=bool(summary.degraded_steps),
            sections=self._section_rows(sections),
            steps=list(self._steps),
            summary=summary,
            escalation=self._desk.state,
            critic_verdict=verdict,
            plan=dumps_plan(subtasks),
            actions=actions,
            compensated=compensated,
            compensation_log=self._saga,
            notifications=self._notifications(),
            revisions=list(self._reruns.revisions),
        ).bounded()

    async def _plan(
        self, inp: PipelineInput, context: list[Any], specialists: list[str]
    ) -> list[Subtask]:
        """The planner step: the subtasks, or one per specialist when its plan is unusable."""
        opts = inp.options
        self._phase = "planning"
        self._pending = [PLANNER, "specialists", CRITIC, SYNTHESIS]
        if opts.actions:
            self._pending.append(ACTIONS)
        plan_out = await self._step(
            PLANNER, PLANNER, planner_request(inp.task, context, specialists), opts
        )
        try:
            subtasks = parse_plan(
                plan_out.data, known_roles=specialists, max_subtasks=opts.max_subtasks
            )
        except PlanError as exc:
            # A schema-valid but unusable plan: fall back to one subtask per specialist.
            workflow.logger.warning("planner output unusable (%s); using a default plan", exc)
            subtasks = [
                Subtask(id=f"s{i + 1}", role=r, instruction=inp.task)
                for i, r in enumerate(specialists[: opts.max_subtasks])
            ]
        self._done_stage(PLANNER)
        return subtasks

    async def _review(
        self,
        task: str,
        subtasks: list[Subtask],
        sections: list[tuple[str, AgentOutput]],
        context: list[Any],
    ) -> tuple[list[tuple[str, AgentOutput]], str | None]:
        """Critic rounds: the (possibly revised) sections and the last verdict."""
        opts = self._opts
        verdict = None
        for round_no in range(opts.revision_rounds + 1):
            self._phase = "critic"
            critic_out = await self._step(
                f"{CRITIC}#{round_no + 1}", CRITIC, critic_request(task, sections), opts
            )
            verdict, reasons = review_verdict(critic_out)
            # Only an actual request for changes starts a revision round: an unreviewed
            # verdict (no critic could answer) has nothing for the specialists to act on.
            if verdict != REVISE or round_no == opts.revision_rounds:
                break
            self._phase = "revision"
            sections = await self._run_specialists(
                task, subtasks, context, reasons, opts, revision=round_no + 1
            )
        return sections, verdict

    async def _wrap_up(self) -> None:
        """Degraded re-runs, pending shadow starts and notifications, before the result."""
        if self._reruns.noted:
            self._phase = "rerun"
            await self._reruns.run(self._escalate_rerun, self._upsert_revisions)
        await settle_shadows()
        self._phase = "done"
        self._pending = []
        await self._flush_notifications()

    def _section_rows(self, sections: list[tuple[str, AgentOutput]]) -> list[Section]:
        suppress = self._opts.suppress_degraded_sections
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

    # -- stages -------------------------------------------------------------------------

    async def _load_roles(self) -> PipelineRoles:
        return await workflow.execute_local_activity_method(
            RoleContextActivities.pipeline_roles,
            PipelineRolesInput(),
            start_to_close_timeout=timedelta(seconds=10),
            # Bounded like role_context: a recurring error ends the run with its reason.
            retry_policy=LOCAL_ACTIVITY_RETRY,
            summary="pipeline roles from the worker's policy",
        )

    async def _run_specialists(
        self,
        task: str,
        subtasks: list[Subtask],
        context,
        feedback: list[str],
        opts,
        revision: int = 0,
    ) -> list[tuple[str, AgentOutput]]:
        upstream = self._upstream_reasons()
        # Step names use the position, not the model's subtask id, so they stay short and
        # stable across a revision round. Each round gets its own suffix: the failover
        # history is keyed by step name, so a repeated name would drop a round's attempts.
        suffix = "" if revision == 0 else "/rev" if revision == 1 else f"/rev{revision}"
        names = [f"{s.role}#{i + 1}{suffix}" for i, s in enumerate(subtasks)]
        outs = await asyncio.gather(
            *(
                self._step(
                    name,
                    s.role,
                    specialist_request(task, s, context, feedback),
                    opts,
                    upstream=upstream,
                )
                for name, s in zip(names, subtasks, strict=True)
            )
        )
        return list(zip(names, outs, strict=True))

    async def _answer(self, name: str, role: str, request, opts, upstream) -> AgentOutput:
        """One answer for the step: an agent loop when the role has tools, else one call."""
        specs = [t for t in opts.agent_tools if t.role == role]
        if not specs or not workflow.patched(AGENT_TOOLS_PATCH):
            return await resilient_complete(role, request, upstream_reasons=upstream)
        if self._saga is None:
            self._saga = CompensationLog()
        loop = await run_agent_loop(
            role,
            request,
            tools=[_agent_tool(t) for t in specs],
            saga=Saga(self._saga),
            step=name,
            max_turns=opts.max_tool_turns,
            max_tokens=opts.tool_budget_tokens,
            upstream_reasons=upstream,
        )
        workflow.logger.info(
            "step %s: agent loop ended (%s) after %d turn(s), %d tool call(s)",
            name,
            loop.stop_reason.value,
            loop.turns,
            len(loop.tool_runs),
        )
        out = loop.output
        if out.tool_calls and not out.content.strip():
            # Stopped by the turn limit or the budget while still asking for tools: say so
            # in the section rather than hand the critic an empty one.
            note = f"[{loop.stop_reason.value}: stopped after {loop.turns} turn(s)]"
            out = out.model_copy(update={"content": note})
        return out

    async def _step(self, name: str, role: str, request, opts, upstream=None) -> AgentOutput:
        out = await self._answer(name, role, request, opts, upstream)
        while opts.escalate_on_critical_degraded:
            floor = self._min_confidence.get(role, 0.0)
            trigger = escalation_trigger(out, critical=role in self._critical, min_confidence=floor)
            if trigger is None:
                break
            if self._desk.standing is not None:
                # Already accepted for this run (by a human or the timeout action): the
                # one escalation covers this step too, without another pause.
                out = _accepted(out)
                break
            blocked = BlockedStep(
                step=name,
                role=role,
                trigger=trigger.value,
                reason=trigger_reason(trigger, role, out, floor),
                confidence=out.confidence,
            )
            decision = await self._escalate(blocked, out, opts)
            if decision.action is EscalationAction.ABORT:
                await self._abort(decision, name)
            if decision.action is EscalationAction.RETRY:
                out = await self._answer(name, role, request, opts, upstream)
                continue
            if decision.action is EscalationAction.PROVIDE_OUTPUT:
                out = _human_output(role, decision, out)
            else:
                out = _accepted(out)
            break
        self._reruns.note(name, role, request, upstream, out)
        self._steps.append(StepResult(step=name, output=out))
        self._upsert()
        return out

    async def _escalate(self, blocked: BlockedStep, out: AgentOutput, opts) -> EscalationDecision:
        """Join (or open) the pipeline's escalation; apply the timeout action if nobody answers."""
        if not self._desk.open:
            self._opened_by = (blocked.step, blocked.role, blocked.reason, out)
        decision = await self._desk.wait(blocked, opts.escalation_timeout_s)
        if decision is not None:
            return decision
        action = opts.escalation_timeout_action
        if action is EscalationTimeoutAction.ACCEPT_DEGRADED:
            accept = self._desk.timeout_decision(
                f"no decision within {opts.escalation_timeout_s:g}s; policy accepts degraded"
            )
            self._desk.stand(accept)
            return accept
        await self._end_on_timeout(action, opts.escalation_timeout_s)

    async def _end_on_timeout(self, action: EscalationTimeoutAction, timeout_s: float) -> NoReturn:
        """Fail the run with the reason; with ``abort``, undo applied side effects first."""
        blocked = self._desk.blocked()
        what = "; ".join(f"{b.step}: {b.reason}" for b in blocked) or "unknown step"
        undone: list[CompensationEntry] = []
        if action is EscalationTimeoutAction.ABORT:
            undone = await self._unwind()
        tail = f"; aborted, {len(undone)} side effect(s) compensated" if undone else ""
        await self._flush_notifications()
        raise ApplicationError(
            f"escalation timed out after {timeout_s:g}s with no decision ({action.value}); "
            f"blocked: {what}{tail}",
            {
                "action": action.value,
                "blocked_steps": [b.model_dump(mode="json") for b in blocked],
                "compensated": [e.effect.step for e in undone],
                "not_compensated": self._not_undone(),
            },
            type=ESCALATION_TIMED_OUT,
            non_retryable=True,
        )

    def _escalation_snapshot(self, blocked: list[BlockedStep]) -> PendingEscalation:
        step, role, reason, out = self._opened_by or (blocked[0].step, blocked[0].role, "", None)
        assert out is not None
        return PendingEscalation(
            step=step,
            role=role,
            reason=reason,
            output=out,
            completed_steps=[s.step for s in self._steps],
            pending_steps=list(self._pending),
            failover_history=self._history(),
            compensation_log=self._saga.model_copy(deep=True) if self._saga else None,
            blocked_steps=blocked,
            timeout_action=self._opts.escalation_timeout_action,
        )

    async def _abort(self, decision: EscalationDecision, step: str) -> NoReturn:
        """An operator's abort: undo every applied side effect, then fail the run."""
        undone = await self._unwind()
        self._desk.mark(EscalationState.ABORTED)
        tail = f"; {len(undone)} side effect(s) compensated" if undone else ""
        await self._flush_notifications()
        raise ApplicationError(
            f"pipeline aborted by {decision.operator} at step {step}: {decision.note}{tail}",
            {"compensated": [e.effect.step for e in undone], "not_compensated": self._not_undone()},
            type=ABORTED,
            non_retryable=True,
        )

    # -- degraded re-runs ---------------------------------------------------------------

    async def _escalate_rerun(self, rev: StepRevision) -> StepRevision:
        """A re-run that disagrees materially: a human decides which answer stands."""
        assert rev.revised is not None
        if self._desk.standing is not None:
            # An acceptance of degraded answers already stands for this run.
            return rev.model_copy(update={"decision": self._desk.standing.action.value})
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
        decision = await self._escalate(blocked, rev.revised, self._opts)
        if decision.action is EscalationAction.ABORT:
            await self._abort(decision, blocked.step)
        update: dict[str, Any] = {"decision": decision.action.value}
        if decision.action is EscalationAction.PROVIDE_OUTPUT:
            update["revised"] = _human_output(rev.role, decision, rev.revised)
        return rev.model_copy(update=update)

    def _upsert_revisions(self) -> None:
        workflow.upsert_search_attributes([REVISION_STATE.value_set(self._reruns.state())])

    # -- side effects (saga) ------------------------------------------------------------

    async def _apply_actions(
        self, specs: list[ActionSpec], answer: str, synth: AgentOutput, opts
    ) -> tuple[list[ActionResult], list[CompensationEntry]]:
        """Apply each action once (keyed); on a hard failure undo the applied ones in reverse."""
        wid = workflow.info().workflow_id
        # Effects of agent tools (earlier steps) share the log: a failure here undoes them too.
        log = self._saga = self._saga or CompensationLog()
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
            compensated = await self._compensate(log, synth, opts)
            results = _with_undo_status(results, log)
        self._done_stage(ACTIONS)
        return results, compensated

    async def _apply_one(
        self, spec: ActionSpec, step: str, key: str, answer: str, log: CompensationLog
    ) -> ActionResult:
        """Run one action; log its undo (or, after an ambiguous failure, its maybe-undo)."""
        args = render_args(spec.args, spec.answer_arg, answer)
        try:
            res = await self._tool(
                "run_tool", step, spec.tool, args, key, spec.max_attempts, spec.timeout_s
            )
        except ActivityError as exc:
            _log_maybe_applied(log, spec, step, args, key, exc)
            return ActionResult(
                step=step,
                tool=spec.tool,
                idempotency_key=key,
                status=ActionStatus.FAILED,
                error=_cause(exc),
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
        self, log: CompensationLog, synth: AgentOutput, opts
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
                error = await self._undo(eff)
                if error is None:
                    done.append(self._mark_undone(log, eff.idempotency_key))
                    break
                log.mark_failed(eff.idempotency_key, error)
                if leave_rest:
                    log.mark_left(eff.idempotency_key)
                    break
                decision = await self._escalate_undo(eff, error, synth, opts)
                if decision.action is EscalationAction.RETRY:
                    continue
                # accept_degraded, provide_output or an accepting timeout: the effect stays.
                leave_rest = decision.action is EscalationAction.ACCEPT_DEGRADED
                log.mark_left(eff.idempotency_key)
                break
        return done

    async def _escalate_undo(
        self, eff: SideEffect, error: str, synth: AgentOutput, opts
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
        decision = await self._escalate(blocked, synth, opts)
        if decision.action is EscalationAction.ABORT:
            await self._abort(decision, step)
        return decision

    async def _undo(self, eff: SideEffect) -> str | None:
        """Run one compensation (its own retries included); the error, or None if undone.

        An undo that found nothing to undo (404) is recorded in ``self._nothing``.
        """
        assert eff.compensation_tool is not None  # the log only yields undoable effects
        try:
            res = await self._tool(
                "compensate",
                f"{eff.step}/compensate",
                eff.compensation_tool,
                eff.compensation_args,
                compensation_key(eff.idempotency_key, eff.compensation_tool),
                COMPENSATION_ATTEMPTS,
                10.0,
            )
        except ActivityError as exc:
            observe.compensation("failed", eff.step, eff.compensation_tool, _cause(exc))
            return _cause(exc)
        observe.compensation("run", eff.step, eff.compensation_tool)
        if res.result.get(NOTHING_APPLIED) is True:
            self._nothing.add(eff.idempotency_key)
        return None

    def _mark_undone(self, log: CompensationLog, key: str) -> CompensationEntry:
        entry = log.mark_compensated(key, nothing_applied=key in self._nothing)
        return entry.model_copy(deep=True)

    async def _unwind(self) -> list[CompensationEntry]:
        """Abort path: try every outstanding undo once more, without escalating again."""
        log = self._saga
        if log is None:
            return []
        self._unwound = True
        done: list[CompensationEntry] = []
        for entry in log.to_compensate():
            eff = entry.effect
            error = await self._undo(eff)
            if error is None:
                done.append(self._mark_undone(log, eff.idempotency_key))
            else:
                log.mark_failed(eff.idempotency_key, error)
        return done

    def _not_undone(self) -> list[dict[str, Any]]:
        """Log entries whose undo failed, for the run's failure details (never dropped)."""
        log = self._saga
        failed = log.with_status(CompensationStatus.FAILED) if log else []
        return [e.model_dump(mode="json") for e in failed]

    async def _unwind_on_failure(self, exc: BaseException) -> None:
        """The run is failing or cancelled: undo what is still applied (shielded), once.

        An abort already unwound; an undo that still fails turns the failure into
        ``COMPENSATION_FAILED`` carrying the entries, so none is dropped silently.
        """
        log = self._saga
        if log is None or self._unwound or not log.to_compensate():
            return
        if not workflow.patched(UNWIND_ON_FAILURE_PATCH):
            return
        self._phase = "compensating"
        workflow.logger.warning("run ending (%s): undoing applied side effects", type(exc).__name__)
        await asyncio.shield(asyncio.ensure_future(self._unwind()))
        failed = log.with_status(CompensationStatus.FAILED)
        if failed:
            raise compensation_failed(failed) from exc

    async def _tool(
        self,
        activity: str,
        step: str,
        tool: str,
        args: dict[str, Any],
        key: str,
        max_attempts: int,
        timeout_s: float,
    ) -> ToolCallResult:
        return await workflow.execute_activity(
            activity,
            ToolCallInput(
                tool=tool, args=args, idempotency_key=key, step=step, timeout_s=timeout_s
            ),
            result_type=ToolCallResult,
            # The HTTP timeout fires first; this only bounds a stuck worker.
            start_to_close_timeout=timedelta(seconds=timeout_s + 5),
            retry_policy=RetryPolicy(
                initial_interval=TOOL_RETRY_INITIAL,
                backoff_coefficient=2.0,
                maximum_interval=TOOL_RETRY_MAX,
                maximum_attempts=max_attempts,
                non_retryable_error_types=list(NON_RETRYABLE_TOOL_ERRORS),
            ),
            summary=f"{step}: {tool}",
        )

    # -- visibility ---------------------------------------------------------------------

    async def _flush_notifications(self) -> None:
        """Give on-call notifications still in flight a bounded moment before the run ends."""
        if self._desk.notifications is not None:
            await self._desk.notifications.flush()

    def _notifications(self) -> list[NotifyResult]:
        notes = self._desk.notifications
        return list(notes.records) if notes is not None else []

    def _done_stage(self, stage: str) -> None:
        if stage in self._pending:
            self._pending.remove(stage)

    def _summary(self) -> FailoverSummary:
        return summarize([(s.step, s.output) for s in self._steps])

    def _upstream_reasons(self) -> list[ReasonCode]:
        return [ReasonCode.UPSTREAM_DEGRADED] if self._summary().degraded_steps else []

    def _history(self) -> dict[str, list[AttemptRecord]]:
        return {s.step: s.output.attempts for s in self._steps}

    def _upsert(self) -> None:
        summary = self._summary()
        upsert_failover_search_attributes(summary, escalation_state=self._desk.state.value)
        self._details(summary)

    def _details(self, summary: FailoverSummary | None = None) -> None:
        # Current details are metadata, not a command: updating them never affects replay.
        set_failover_details(
            [(s.step, s.output) for s in self._steps],
            summary or self._summary(),
            escalation_state=self._desk.state.value,
            phase=self._phase,
        )

    @workflow.update(name="resolve")
    def resolve(self, decision: EscalationDecision) -> EscalationReceipt:
        """A human's decision on the open escalation; refused unless it applies."""
        pending = self._desk.pending  # the validator made sure there is one
        self._desk.resolve(decision)
        return EscalationReceipt(
            workflow_id=workflow.info().workflow_id,
            step=", ".join(b.step for b in self._desk.blocked())
            or (pending.step if pending else ""),
            role=pending.role if pending else "",
            action=decision.action,
        )

    @resolve.validator
    def _decision_applies(self, decision: EscalationDecision) -> None:
        pending = self._desk.pending
        if not self._desk.open or pending is None:
            raise ValueError(
                f"not waiting for a decision (escalation {self._desk.state.value}, "
                f"phase {self._phase})"
            )
        if self._desk.decided:
            raise ValueError("this escalation already has a decision")
        if decision.action is EscalationAction.RETRY and any(
            b.trigger == RERUN_DISAGREED for b in self._desk.blocked()
        ):
            raise ValueError(
                "retry does not apply to a re-run that disagrees; use accept_degraded (keep "
                "the degraded answer), provide_output or abort"
            )
        if decision.action is EscalationAction.PROVIDE_OUTPUT:
            if any(b.role == SAGA for b in self._desk.blocked()):
                raise ValueError(
                    "provide_output does not apply to a failed compensation; "
                    "use retry, accept_degraded or abort"
                )
            if not decision.output:
                raise ValueError("provide_output needs the output text")

    @workflow.signal(name="resolve_escalation")
    def resolve_escalation(self, decision: EscalationDecision) -> None:
        """Older signal form of ``resolve`` (ignored when nothing is pending)."""
        self._desk.resolve(decision)

    @workflow.query(name="status")
    def status(self) -> PipelineStatus:
        return PipelineStatus(
            phase=self._phase,
            completed_steps=[s.step for s in self._steps],
            pending_steps=list(self._pending),
            summary=self._summary(),
            escalation=self._desk.state,
            pending_escalation=self._desk.pending,
            compensation_log=self._saga,
            notifications=self._notifications(),
        )

    @workflow.query(name="revisions")
    def revisions(self) -> list[StepRevision]:
        """Degraded steps re-run so far: revised, escalated, failed or expired."""
        return list(self._reruns.revisions)

    @workflow.query(name="failover_history")
    def failover_history(self) -> list[StepHistory]:
        """Every finished step: who answered, reason codes, attempts with ISO timestamps."""
        return [StepHistory.of(s.step, s.output) for s in self._steps]


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
    if comp_tool is None or not workflow.patched(MAYBE_APPLIED_PATCH):
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


def _agent_tool(spec: AgentToolSpec) -> AgentTool:
    """A tool-server tool for the agent loop: ``run_tool``, undone through ``compensate``."""
    undo, _ = compensation_for(spec.name, spec.compensation, {}, {})
    return AgentTool(
        spec=ToolSpec(name=spec.name, description=spec.description, parameters=spec.parameters),
        activity="run_tool",
        compensation="compensate" if undo else None,
        undo_tool=undo,
        retry_policy=RetryPolicy(
            initial_interval=TOOL_RETRY_INITIAL,
            backoff_coefficient=2.0,
            maximum_interval=TOOL_RETRY_MAX,
            maximum_attempts=spec.max_attempts,
            non_retryable_error_types=list(NON_RETRYABLE_TOOL_ERRORS),
        ),
        timeout=timedelta(seconds=spec.timeout_s),
        compensation_retry_policy=RetryPolicy(
            initial_interval=TOOL_RETRY_INITIAL,
            backoff_coefficient=2.0,
            maximum_interval=TOOL_RETRY_MAX,
            maximum_attempts=COMPENSATION_ATTEMPTS,
            non_retryable_error_types=list(NON_RETRYABLE_TOOL_ERRORS),
        ),
    )


def _cause(exc: ActivityError) -> str:
    """``type: message`` of the failure behind an activity error."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return f"{cause.type}: {cause.message}"
    return f"{type(cause).__name__}: {cause}" if cause else str(exc)


def _accepted(out: AgentOutput) -> AgentOutput:
    """``out`` kept as it is, marked as escalated and accepted degraded."""
    codes = [*out.reason_codes, ReasonCode.ESCALATED, ReasonCode.ACCEPTED_DEGRADED]
    return out.model_copy(update={"reason_codes": list(dict.fromkeys(codes))})


def _human_output(role: str, decision: EscalationDecision, out: AgentOutput) -> AgentOutput:
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
