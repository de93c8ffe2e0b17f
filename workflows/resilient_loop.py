"""The loop behind :func:`workflows.resilient.resilient_complete`: plan, attempt, fold the
failures in, plan again, then the degraded tiers.

Imported on the first call, not with ``resilient_complete``: a workflow file that imports
the call (and the request and result types) pays for none of this (``bench/import_cost.py``);
workers load it up front (:mod:`agent_failover.plugin`).
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.failures import POLICY_ERROR
    from agent_failover.resilience.cachekey import cache_key
    from agent_failover.resilience.config import RolePolicy
    from agent_failover.resilience.contracts import AgentOutput, ReasonCode
    from agent_failover.resilience.estimate import estimate_request_tokens
    from agent_failover.resilience.first_attempt import round_facts
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.options import CallOptions, OnExhausted
    from agent_failover.resilience.outcomes import apply_failure
    from agent_failover.resilience.planner import FailoverPlan
    from agent_failover.workflows import context_reuse, observe
    from agent_failover.workflows.answers import refusal, success
    from agent_failover.workflows.attempts import single, summarize_before_triage
    from agent_failover.workflows.call import AttemptResult, Call
    from agent_failover.workflows.degraded import degraded
    from agent_failover.workflows.errors import FailoverExhausted
    from agent_failover.workflows.escalate import note_role
    from agent_failover.workflows.first_call import FirstRound, first_ran
    from agent_failover.workflows.hedge import hedge_for, hedged
    from agent_failover.workflows.planning import (
        decision_rules,
        load_context,
        plan_round,
        prepare_request,
        record_skipped,
        routes_by_family,
        wire_rule,
    )

__all__ = ["ResilientCall", "complete"]


async def complete(
    role: str,
    request: ChatRequest,
    options: CallOptions | None,
    upstream_reasons: list[ReasonCode] | None,
) -> AgentOutput:
    """:func:`workflows.resilient.resilient_complete`'s body."""
    call = Call(role, request, upstream_reasons or [], options)
    return await ResilientCall(call).run()


class ResilientCall:
    """The loop of one call: plan, attempt (hedged when planned), fold the failures in and
    plan again, until an answer, a refusal, or no live route is left (degraded tiers)."""

    def __init__(self, call: Call) -> None:
        self.call = call

    async def run(self) -> AgentOutput:
        with observe.call_span(self.call):
            out = await self._run()
            observe.answered(self.call, out)
            return out

    async def _run(self) -> AgentOutput:
        call = self.call
        started = workflow.now()
        call.started_at = started.timestamp()
        ctx, first = await load_context(call, started)
        role = ctx.role
        note_role(role)  # escalate()'s default floor for this role's answers
        request = prepare_request(call, role)
        key = cache_key(call.role_name, request)
        call.cache_key = key
        by_family = routes_by_family(ctx.policy)
        floor, ticket = decision_rules(call, request)
        input_tokens = estimate_request_tokens(request)
        first_plan: FailoverPlan | None = None
        while not call.state.stop_live:
            # The round its first attempt's activity ran was planned at the call's start.
            at = first.at if first is not None and first.ran else None
            elapsed_ms = (
                0.0 if at is not None else (workflow.now() - started).total_seconds() * 1000
            )
            facts = round_facts(
                call.state,
                request,
                input_tokens=input_tokens,
                floor=floor,
                ticket=ticket,
                elapsed_ms=elapsed_ms,
            )
            p = plan_round(call, role, facts, at)
            if first_plan is None:
                first_plan = p
                record_skipped(call, p)
            if not p.attempts:
                break
            done = await self._round(p, role, key, started, by_family, first)
            if done is not None:
                return done
            first = None
        assert first_plan is not None
        if call.options is not None and call.options.on_exhausted is OnExhausted.RAISE:
            raise FailoverExhausted(call.role_name, call.attempts, list(call.state.reasons))
        return await degraded(call, first_plan, key, role, started)

    async def _round(
        self,
        p: FailoverPlan,
        role: RolePolicy,
        key: str,
        started: datetime,
        by_family: dict[str, list[str]],
        first_round: FirstRound | None = None,
    ) -> AgentOutput | None:
        """One planned attempt (hedged when the plan says so): the answer, a refusal that
        ends the call, or None to plan again. ``first_round``: what the first attempt's
        activity brought (its attempt already run when it names a route)."""
        call = self.call
        first = p.attempts[0]
        if first_round is not None and first_round.ran:
            results = await first_ran(call, first, first_round)
        else:
            results = await self._attempt(p, role, started, first_round)
        winner = next((r for r in results if r.result is not None), None)
        for r in results:
            if r.error_type == POLICY_ERROR:
                # A worker that cannot serve a planned route is misconfigured; other
                # routes would hide that, so the call ends here with the worker's words.
                raise ApplicationError(
                    r.record.error or "policy error", type=POLICY_ERROR, non_retryable=True
                )
            call.attempts.append(r.record)
            if r.error_type is not None:
                self._fold_failure(r, by_family)
        if winner is not None:
            return success(call, winner, role)
        return refusal(call, results, role, started)

    async def _attempt(
        self, p: FailoverPlan, role: RolePolicy, started: datetime, first_round: FirstRound | None
    ) -> list[AttemptResult]:
        """Run the plan's first attempt (after its wait, hedged when planned)."""
        call = self.call
        first = p.attempts[0]
        if first.wait_ms > 0:
            # What is left of a short Retry-After a probe (or another call) met: a durable
            # timer, then the attempt on the route (resilience.ratelimit).
            await workflow.sleep(
                first.wait_ms / 1000,
                summary=f"Retry-After of {first.route}: {first.wait_ms:.0f} ms",
            )
        hedge = hedge_for(call, p, role)
        await summarize_before_triage(call, role, first, hedge, started)
        results = await (hedged(call, first, hedge) if hedge else single(call, first))
        if first_round is not None and first_round.out.tries > 1:
            note = "after a first try planned in its activity was retried (see the Temporal UI)"
            results[0].record.note = f"{results[0].record.note} {note}".strip()
        return results

    def _fold_failure(self, r: AttemptResult, by_family: dict[str, list[str]]) -> None:
        """Fold a failed attempt into the call's failover state (exclusions, cool-downs,
        a larger context window needed, a partial answer to continue)."""
        call = self.call
        # The run's next calls must not plan from a snapshot taken before this failure.
        context_reuse.forget_route(r.attempt.route)
        ep = call.ctx.policy.endpoints[r.attempt.route]
        learned = call.ctx.snapshot.get(r.attempt.route).context_window
        call.state = apply_failure(
            call.state,
            route=r.attempt.route,
            model=ep.family,
            context_window=learned or ep.context_window,
            stated_context_window=r.details.get("context_window"),
            error_type=r.error_type or "",
            retry_after_s=r.details.get("retry_after_s"),
            partial_text=r.details.get("partial_text") or "",
            partial_truncated=bool(r.details.get("partial_truncated")),
            used_prefill=r.used_prefill,
            now=workflow.now().timestamp(),
            routes_by_model=by_family,
            decision=r.details.get("decision"),
            **wire_rule(call, r.attempt.route, r.error_type or ""),
        )
