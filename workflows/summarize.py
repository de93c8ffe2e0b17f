"""Summarization before truncation, from workflow code (see :mod:`resilience.summarize`).

One ``call_model`` activity on the cheapest healthy route of the role, bounded by the
role's ``summarize.budget_ms`` and never retried: on a timeout or any failure the call
goes on with plain triage, and the attempts that used it say so in their note.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.model_call import ModelCallActivities
    from agent_failover.activities.models import CallModelInput, CallModelResult
    from agent_failover.resilience.config import PolicyConfig, RolePolicy
    from agent_failover.resilience.contracts import HealthSnapshot
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.summarize import plan_summary, summary_route, with_summary

#: Below this much time left in the call, summarizing is not tried.
MIN_SUMMARY_BUDGET_MS = 50.0


@dataclass
class SummaryOutcome:
    """The summarized request (None: plain triage is used) and what to note on attempts."""

    request: ChatRequest | None
    note: str
    cost_usd: float = 0.0


async def summarize_context(
    role: RolePolicy,
    policy: PolicyConfig,
    snapshot: HealthSnapshot,
    request: ChatRequest,
    *,
    target_tokens: int,
    time_left_ms: float,
    task_queue: str,
    exclude: list[str],
) -> SummaryOutcome | None:
    """Summarize what triage to ``target_tokens`` would drop; None when it would drop only
    background (nothing worth a summary)."""
    plan = plan_summary(request, target_tokens, role.summarize.max_tokens)
    if plan is None:
        return None
    n = len(plan.indices)
    now = workflow.now().timestamp()
    route = summary_route(role, policy, snapshot, plan.request, now, exclude)
    if route is None:
        return SummaryOutcome(None, f"no healthy route to summarize {n} messages; plain triage")
    budget_ms = min(role.summarize.budget_ms, time_left_ms)
    if budget_ms < MIN_SUMMARY_BUDGET_MS:
        return SummaryOutcome(None, f"no time left to summarize {n} messages; plain triage")
    budget = timedelta(milliseconds=budget_ms)
    try:
        result: CallModelResult = await workflow.execute_activity_method(
            ModelCallActivities.call_model,
            _call_input(role.name, route, plan.request, budget_ms, now),
            task_queue=task_queue,
            start_to_close_timeout=budget,
            schedule_to_close_timeout=budget,
            retry_policy=RetryPolicy(maximum_attempts=1),
            summary=f"{role.name}: summarize {n} messages on {route} before triage",
        )
    except ActivityError as err:
        kind = _kind(err)
        why = f"timeout after {budget_ms:.0f} ms: {kind}" if kind in _OUT_OF_TIME else kind
        return SummaryOutcome(
            None, f"summarizing {n} messages on {route} failed ({why}); plain triage"
        )
    summarized = with_summary(request, plan.indices, result.reply.text)
    return SummaryOutcome(
        summarized, f"{n} messages summarized by {route}", cost_usd=result.reply.cost_usd
    )


def _call_input(
    role: str, route: str, request: ChatRequest, budget_ms: float, now: float
) -> CallModelInput:
    """The summarizing call: every budget of the attempt is what is left of the call's."""
    return CallModelInput(
        role=role,
        route=route,
        request=request,
        ttft_budget_ms=budget_ms,
        idle_budget_ms=budget_ms,
        timeout_ms=budget_ms,
        now=now,
        deadline_at=now + budget_ms / 1000,
    )


#: Failures that mean the budget ran out (Temporal's timeout or the attempt's own budgets).
_OUT_OF_TIME = frozenset({"start_to_close", "no_response", "slow_first_token", "stream_stalled"})


def _kind(err: ActivityError) -> str:
    if isinstance(err.cause, TimeoutError):
        return "start_to_close"
    if isinstance(err.cause, ApplicationError):
        return err.cause.type or "error"
    return "error"
