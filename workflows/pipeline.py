"""``AgentPipelineWorkflow``: planner → specialists in parallel → critic → synthesis.

Every agent call goes through :func:`workflows.resilient.resilient_complete`. The
workflow keeps a visible record as it goes: ``status`` and ``failover_history`` queries,
and the search attributes FailoverCount, WorstTier, Degraded and EscalationState, so
"every pipeline that degraded" is one filter in the Temporal UI. When a critical role
can only be answered by its static fallback, the pipeline pauses for a human with its
state serialized, and waits for ``resolve_escalation``.

With ``options.actions`` the pipeline then applies side effects as a saga: each action is a
``run_tool`` activity keyed by :func:`resilience.saga.idempotency_key`; each success
appends its compensation to the log; a hard failure undoes the log in reverse
(``compensate``), and a compensation that cannot complete escalates the same way. With no
actions none of this runs, so histories recorded before it replay unchanged.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from agent_failover.activities.models import (
        PipelineRoles,
        PipelineRolesInput,
        ToolCallInput,
        ToolCallResult,
    )
    from agent_failover.activities.tools import NON_RETRYABLE_TOOL_ERRORS
    from agent_failover.resilience.contracts import (
        AgentOutput,
        AttemptRecord,
        Capability,
        ReasonCode,
    )
    from agent_failover.resilience.pipeline import (
        FailoverSummary,
        PlanError,
        Subtask,
        critic_request,
        dumps_plan,
        final_answer,
        is_section_degraded,
        needs_escalation,
        parse_plan,
        parse_verdict,
        planner_request,
        specialist_request,
        summarize,
        synthesis_request,
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
    from agent_failover.workflows.models import (
        ActionResult,
        ActionSpec,
        ActionStatus,
        EscalationAction,
        EscalationDecision,
        EscalationState,
        PendingEscalation,
        PipelineInput,
        PipelineResult,
        PipelineStatus,
        Section,
        StepResult,
    )
    from agent_failover.workflows.resilient import resilient_complete
    from agent_failover.workflows.search_attributes import upsert_failover_search_attributes


#: Roles the pipeline stages use; specialists are every other role in the policy.
PLANNER, CRITIC, SYNTHESIS = "planner", "critic", "synthesis"
INVALID_INPUT = "invalid_pipeline_input"
ABORTED = "aborted_by_operator"
#: Stage and escalation role of the side-effect saga.
ACTIONS, SAGA = "actions", "saga"
#: Retries of one compensation before it escalates (each attempt is idempotent).
COMPENSATION_ATTEMPTS = 3
TOOL_RETRY_INITIAL = timedelta(milliseconds=200)
TOOL_RETRY_MAX = timedelta(seconds=5)
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
        self._escalation = EscalationState.NONE
        self._pending_escalation: PendingEscalation | None = None
        self._decision: EscalationDecision | None = None
        self._critical: set[str] = set()
        self._saga: CompensationLog | None = None

    @workflow.run
    async def run(self, inp: PipelineInput | dict[str, Any]) -> PipelineResult:
        # The union lets malformed input reach us as a dict instead of failing the
        # workflow task forever in the data converter: we fail the run, naming the field.
        if not isinstance(inp, PipelineInput):
            try:
                inp = PipelineInput.model_validate(inp)
            except ValidationError as exc:
                fields = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
                    for e in exc.errors()
                )
                raise ApplicationError(
                    f"invalid pipeline input: {fields}", type=INVALID_INPUT, non_retryable=True
                ) from None
        opts = inp.options
        context = [(c.content, c.priority) for c in inp.context]
        roles = await self._load_roles()
        self._critical = set(roles.critical)
        specialists = roles.specialists

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
        self._phase = "specialists"
        sections = await self._run_specialists(inp.task, subtasks, context, [], opts)
        self._done_stage("specialists")

        verdict = None
        for round_no in range(opts.revision_rounds + 1):
            self._phase = "critic"
            critic_out = await self._step(
                f"{CRITIC}#{round_no + 1}", CRITIC, critic_request(inp.task, sections), opts
            )
            verdict, reasons = parse_verdict(critic_out.data)
            if verdict == "approve" or round_no == opts.revision_rounds:
                break
            self._phase = "revision"
            sections = await self._run_specialists(
                inp.task, subtasks, context, reasons, opts, revision=round_no + 1
            )

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
            synth, sections, suppress_degraded=opts.suppress_degraded_sections
        )
        actions: list[ActionResult] = []
        compensated: list[CompensationEntry] = []
        if opts.actions:
            self._done_stage(SYNTHESIS)
            self._phase = ACTIONS
            actions, compensated = await self._apply_actions(opts.actions, answer, synth, opts)
        self._phase = "done"
        self._pending = []
        summary = self._summary()
        return PipelineResult(
            answer=answer,
            confidence=confidence,
            degraded=bool(summary.degraded_steps),
            sections=[
                Section(
                    step=step,
                    role=out.role,
                    degraded=is_section_degraded(out),
                    suppressed=opts.suppress_degraded_sections and is_section_degraded(out),
                    capability=out.capability.value,
                    tier=out.tier,
                    reason_codes=[c.value for c in out.reason_codes],
                )
                for step, out in sections
            ],
            steps=list(self._steps),
            summary=summary,
            escalation=self._escalation,
            critic_verdict=verdict,
            plan=dumps_plan(subtasks),
            actions=actions,
            compensated=compensated,
            compensation_log=self._saga,
        )

    # -- stages -------------------------------------------------------------------------

    async def _load_roles(self) -> PipelineRoles:
        return await workflow.execute_local_activity(
            "pipeline_roles",
            PipelineRolesInput(),
            result_type=PipelineRoles,
            start_to_close_timeout=timedelta(seconds=10),
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

    async def _step(self, name: str, role: str, request, opts, upstream=None) -> AgentOutput:
        out = await resilient_complete(role, request, upstream_reasons=upstream)
        while (
            needs_escalation(out, critical=role in self._critical)
            and opts.escalate_on_critical_degraded
        ):
            decision = await self._escalate(name, role, out, opts.escalation_timeout_s)
            if decision is None:
                out = out.model_copy(
                    update={"reason_codes": [*out.reason_codes, ReasonCode.ESCALATED]}
                )
                break
            if decision.action is EscalationAction.ABORT:
                self._abort(decision, name)
            if decision.action is EscalationAction.RETRY:
                out = await resilient_complete(role, request, upstream_reasons=upstream)
                continue
            if decision.action is EscalationAction.PROVIDE_OUTPUT:
                out = AgentOutput(
                    role=role,
                    content=decision.output or "",
                    capability=Capability.FULL,
                    tier=0,
                    route="human",
                    model=f"operator:{decision.operator}",
                    reason_codes=[ReasonCode.HUMAN_PROVIDED, ReasonCode.ESCALATED],
                    confidence=1.0,
                    attempts=out.attempts,
                )
            else:
                out = out.model_copy(
                    update={
                        "reason_codes": [
                            *out.reason_codes,
                            ReasonCode.ESCALATED,
                            ReasonCode.ACCEPTED_DEGRADED,
                        ]
                    }
                )
            break
        self._steps.append(StepResult(step=name, output=out))
        self._upsert()
        return out

    async def _escalate(
        self, step: str, role: str, out: AgentOutput, timeout_s: float
    ) -> EscalationDecision | None:
        """Pause with state serialized until a human decides, or the timeout lapses."""
        return await self._await_decision(
            self._pending_state(
                step,
                role,
                f"critical role {role!r} could only be answered by its static fallback",
                out,
            ),
            timeout_s,
        )

    def _pending_state(
        self, step: str, role: str, reason: str, out: AgentOutput
    ) -> PendingEscalation:
        return PendingEscalation(
            step=step,
            role=role,
            reason=reason,
            output=out,
            completed_steps=[s.step for s in self._steps],
            pending_steps=list(self._pending),
            failover_history=self._history(),
            compensation_log=self._saga.model_copy(deep=True) if self._saga else None,
        )

    async def _await_decision(
        self, pending: PendingEscalation, timeout_s: float
    ) -> EscalationDecision | None:
        self._decision = None
        self._escalation = EscalationState.PENDING
        self._pending_escalation = pending
        self._upsert()
        step = pending.step
        workflow.logger.warning("pipeline escalated at step %s; waiting for a decision", step)
        try:
            await workflow.wait_condition(
                lambda: self._decision is not None, timeout=timedelta(seconds=timeout_s)
            )
        except TimeoutError:
            self._escalation = EscalationState.TIMED_OUT
            self._pending_escalation = None
            self._upsert()
            return None
        self._escalation = EscalationState.RESOLVED
        self._pending_escalation = None
        self._upsert()
        return self._decision

    def _abort(self, decision: EscalationDecision, step: str) -> NoReturn:
        self._escalation = EscalationState.ABORTED
        self._upsert()
        raise ApplicationError(
            f"pipeline aborted by {decision.operator} at step {step}: {decision.note}",
            type=ABORTED,
            non_retryable=True,
        )

    # -- side effects (saga) ------------------------------------------------------------

    async def _apply_actions(
        self, specs: list[ActionSpec], answer: str, synth: AgentOutput, opts
    ) -> tuple[list[ActionResult], list[CompensationEntry]]:
        """Apply each action once (keyed); on a hard failure undo the applied ones in reverse."""
        wid = workflow.info().workflow_id
        log = self._saga = CompensationLog()
        results: list[ActionResult] = []
        failed = False
        for i, spec in enumerate(specs):
            step = f"action#{i + 1}"
            # The key covers the declared args, not the answer: a re-run of this workflow
            # id maps onto the effect already applied even if the answer changed.
            key = idempotency_key(wid, step, spec.tool, spec.args)
            if failed:
                results.append(
                    ActionResult(
                        step=step, tool=spec.tool, idempotency_key=key, status=ActionStatus.SKIPPED
                    )
                )
                continue
            args = render_args(spec.args, spec.answer_arg, answer)
            try:
                res = await self._tool(
                    "run_tool", step, spec.tool, args, key, spec.max_attempts, spec.timeout_s
                )
            except ActivityError as exc:
                failed = True
                results.append(
                    ActionResult(
                        step=step,
                        tool=spec.tool,
                        idempotency_key=key,
                        status=ActionStatus.FAILED,
                        error=_cause(exc),
                    )
                )
                continue
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
            results.append(
                ActionResult(
                    step=step,
                    tool=spec.tool,
                    idempotency_key=key,
                    status=ActionStatus.APPLIED,
                    result=res.result,
                    replayed=res.replayed,
                )
            )
        compensated: list[CompensationEntry] = []
        if failed:
            compensated = await self._compensate(log, synth, opts.escalation_timeout_s)
            undone = {
                e.effect.idempotency_key: _UNDO_STATUS[e.status]
                for e in log.entries
                if e.status in _UNDO_STATUS
            }
            results = [
                r.model_copy(update={"status": undone[r.idempotency_key]})
                if r.idempotency_key in undone
                else r
                for r in results
            ]
        self._done_stage(ACTIONS)
        return results, compensated

    async def _compensate(
        self, log: CompensationLog, synth: AgentOutput, timeout_s: float
    ) -> list[CompensationEntry]:
        """Undo the log newest first; an undo that cannot complete escalates."""
        done: list[CompensationEntry] = []
        for entry in log.to_compensate():
            eff = entry.effect
            assert eff.compensation_tool is not None  # to_compensate() only yields undoable
            ckey = compensation_key(eff.idempotency_key, eff.compensation_tool)
            while True:
                try:
                    await self._tool(
                        "compensate",
                        f"{eff.step}/compensate",
                        eff.compensation_tool,
                        eff.compensation_args,
                        ckey,
                        COMPENSATION_ATTEMPTS,
                        10.0,
                    )
                except ActivityError as exc:
                    log.mark_failed(eff.idempotency_key, _cause(exc))
                    reason = (
                        f"compensation {eff.compensation_tool} of {eff.step} ({eff.tool}) "
                        f"could not complete: {_cause(exc)}"
                    )
                    decision = await self._await_decision(
                        self._pending_state(f"{eff.step}/compensate", SAGA, reason, synth),
                        timeout_s,
                    )
                    if decision is not None and decision.action is EscalationAction.ABORT:
                        self._abort(decision, f"{eff.step}/compensate")
                    if decision is not None and decision.action is EscalationAction.RETRY:
                        continue
                    # accept_degraded, provide_output or timeout: the effect stays in place.
                    log.mark_left(eff.idempotency_key)
                    break
                done.append(log.mark_compensated(eff.idempotency_key).model_copy(deep=True))
                break
        return done

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
        upsert_failover_search_attributes(self._summary(), escalation_state=self._escalation.value)

    @workflow.signal(name="resolve_escalation")
    def resolve_escalation(self, decision: EscalationDecision) -> None:
        """A human's decision on a pending escalation (ignored when nothing is pending)."""
        if self._escalation is EscalationState.PENDING:
            self._decision = decision

    @workflow.query(name="status")
    def status(self) -> PipelineStatus:
        return PipelineStatus(
            phase=self._phase,
            completed_steps=[s.step for s in self._steps],
            pending_steps=list(self._pending),
            summary=self._summary(),
            escalation=self._escalation,
            pending_escalation=self._pending_escalation,
            compensation_log=self._saga,
        )

    @workflow.query(name="failover_history")
    def failover_history(self) -> dict[str, list[AttemptRecord]]:
        return self._history()


def _cause(exc: ActivityError) -> str:
    """``type: message`` of the failure behind an activity error."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return f"{cause.type}: {cause.message}"
    return f"{type(cause).__name__}: {cause}" if cause else str(exc)
