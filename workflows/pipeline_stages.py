"""The pipeline's stages: planner, specialists in parallel, critic rounds, synthesis.

Each stage is one or more *steps*; a step is one agent answer for a role, through
:func:`workflows.resilient.resilient_complete` (or, for a role with ``agent_tools``, an
agent loop whose tool calls join the run's saga log). A step whose critical role could
only be answered by its static fallback, from the response cache (every model tier down)
or below its ``min_confidence``, blocks on the run's escalation
(:mod:`workflows.pipeline_escalation`) until a human retries it, provides the answer,
accepts it degraded or aborts the run; an acceptance already standing covers it without
another pause. A finished step is recorded in the run's
state, and noted for a re-run if its role asks for one and it was answered degraded.
A planner whose plan is unusable is replaced by one subtask per specialist; only a critic
that asks for changes starts a revision round. Deterministic workflow code.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.models import PipelineRoles, PipelineRolesInput
    from agent_failover.activities.role_context import RoleContextActivities
    from agent_failover.resilience.contracts import AgentOutput, ReasonCode
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.pipeline import (
        REVISE,
        PlanError,
        Subtask,
        critic_request,
        final_answer,
        parse_plan,
        planner_request,
        review_verdict,
        specialist_request,
        synthesis_request,
    )
    from agent_failover.resilience.saga import CompensationLog
    from agent_failover.workflows import context_reuse
    from agent_failover.workflows.agent_loop import run_agent_loop
    from agent_failover.workflows.models import PipelineInput
    from agent_failover.workflows.pipeline_escalation import Escalations
    from agent_failover.workflows.pipeline_saga import agent_tool
    from agent_failover.workflows.pipeline_state import (
        ACTIONS,
        CRITIC,
        PLANNER,
        SPECIALISTS,
        SYNTHESIS,
        PipelineState,
    )
    from agent_failover.workflows.planning import LOCAL_ACTIVITY_RETRY
    from agent_failover.workflows.resilient import resilient_complete
    from agent_failover.workflows.saga import Saga

#: A specialist's section: its step name and its answer.
Sections = list[tuple[str, AgentOutput]]


class Stages:
    """The stage steps of one run, each answered, escalated if blocked, and recorded."""

    def __init__(self, state: PipelineState, escalations: Escalations) -> None:
        self.state = state
        self._escalations = escalations

    async def load_roles(self) -> PipelineRoles:
        """The worker policy's pipeline roles; keeps their critical and re-run settings."""
        roles = await workflow.execute_local_activity_method(
            RoleContextActivities.pipeline_roles,
            PipelineRolesInput(),
            start_to_close_timeout=timedelta(seconds=10),
            # Bounded like role_context: a recurring error ends the run with its reason.
            retry_policy=LOCAL_ACTIVITY_RETRY,
            summary="pipeline roles from the worker's policy",
        )
        self.state.critical = set(roles.critical)
        self.state.min_confidence = dict(roles.min_confidence)
        self.state.reruns.settings = dict(roles.rerun)
        context_reuse.note_hedging(roles.hedged)
        return roles

    async def plan(
        self, inp: PipelineInput, context: list[Any], specialists: list[str]
    ) -> list[Subtask]:
        """The planner step: the subtasks, or one per specialist when its plan is unusable."""
        opts = inp.options
        self.state.phase = "planning"
        self.state.pending = [PLANNER, SPECIALISTS, CRITIC, SYNTHESIS]
        if opts.actions:
            self.state.pending.append(ACTIONS)
        plan_out = await self._step(
            PLANNER, PLANNER, planner_request(inp.task, context, specialists)
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
        self.state.done_stage(PLANNER)
        return subtasks

    async def specialists(self, task: str, subtasks: list[Subtask], context: list[Any]) -> Sections:
        """The specialists' first sections, one per subtask, in parallel."""
        self.state.phase = SPECIALISTS
        sections = await self._specialist_round(task, subtasks, context, [])
        self.state.done_stage(SPECIALISTS)
        return sections

    async def review(
        self, task: str, subtasks: list[Subtask], sections: Sections, context: list[Any]
    ) -> tuple[Sections, str | None]:
        """Critic rounds: the (possibly revised) sections and the last verdict."""
        opts = self.state.opts
        verdict = None
        for round_no in range(opts.revision_rounds + 1):
            self.state.phase = CRITIC
            critic_out = await self._step(
                f"{CRITIC}#{round_no + 1}", CRITIC, critic_request(task, sections)
            )
            verdict, reasons = review_verdict(critic_out)
            # Only an actual request for changes starts a revision round: an unreviewed
            # verdict (no critic could answer) has nothing for the specialists to act on.
            if verdict != REVISE or round_no == opts.revision_rounds:
                break
            self.state.phase = "revision"
            sections = await self._specialist_round(
                task, subtasks, context, reasons, revision=round_no + 1
            )
        self.state.done_stage(CRITIC)
        return sections, verdict

    async def synthesize(
        self, task: str, sections: Sections, verdict: str | None
    ) -> tuple[AgentOutput, str, float]:
        """The synthesis step: its output, the final answer and its confidence."""
        suppress = self.state.opts.suppress_degraded_sections
        self.state.phase = SYNTHESIS
        synth = await self._step(
            SYNTHESIS, SYNTHESIS, synthesis_request(task, sections, suppress_degraded=suppress)
        )
        answer, confidence = final_answer(
            synth, sections, suppress_degraded=suppress, verdict=verdict
        )
        return synth, answer, confidence

    async def _specialist_round(
        self,
        task: str,
        subtasks: list[Subtask],
        context: list[Any],
        feedback: list[str],
        revision: int = 0,
    ) -> Sections:
        upstream = self.state.upstream_reasons()
        # Step names use the position, not the model's subtask id, so they stay short and
        # stable across a revision round. Each round gets its own suffix: the failover
        # history is keyed by step name, so a repeated name would drop a round's attempts.
        suffix = "" if revision == 0 else "/rev" if revision == 1 else f"/rev{revision}"
        names = [f"{s.role}#{i + 1}{suffix}" for i, s in enumerate(subtasks)]
        outs = await asyncio.gather(
            *(
                self._step(name, s.role, specialist_request(task, s, context, feedback), upstream)
                for name, s in zip(names, subtasks, strict=True)
            )
        )
        return list(zip(names, outs, strict=True))

    async def _step(
        self,
        name: str,
        role: str,
        request: ChatRequest,
        upstream: list[ReasonCode] | None = None,
    ) -> AgentOutput:
        """One step: answered, escalated while blocked, then recorded (and noted for a re-run)."""
        out = await self._answer(name, role, request, upstream)
        while self.state.opts.escalate_on_critical_degraded and role in self.state.critical:
            floor = self.state.min_confidence.get(role, 0.0)
            outcome = await self._escalations.settle(name, role, out, floor, None)
            if not outcome.retry:
                out = outcome.output
                break
            out = await self._answer(name, role, request, upstream)
        self.state.reruns.note(name, role, request, upstream, out)
        self.state.record(name, out)
        return out

    async def _answer(
        self, name: str, role: str, request: ChatRequest, upstream: list[ReasonCode] | None
    ) -> AgentOutput:
        """One answer for the step: an agent loop when the role has tools, else one call."""
        opts = self.state.opts
        specs = [t for t in opts.agent_tools if t.role == role]
        if not specs:
            return await resilient_complete(role, request, upstream_reasons=upstream)
        if self.state.saga is None:
            self.state.saga = CompensationLog()
        loop = await run_agent_loop(
            role,
            request,
            tools=[agent_tool(t) for t in specs],
            saga=Saga(self.state.saga),
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
