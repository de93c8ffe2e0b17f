"""A route out of its shared rate budget is planned around like a cooling route, and comes
back when its bucket refilled (workflow time on the time-skipping server)."""

from __future__ import annotations

import uuid

from temporalio.testing import WorkflowEnvironment

from agent_failover.providers.models import ChatRequest, Message
from agent_failover.resilience.config import PolicyConfig, RateBudget, RateBudgets
from agent_failover.resilience.contracts import AgentOutput, ReasonCode
from agent_failover.testing.sim.admin import SimAdmin
from tests.workflows.conftest import Harness, make_harness, running
from tests.workflows.helpers import CallInput, ResilientCallWorkflow

PRIMARY = "anthropic-us-east"


async def _call(env: WorkflowEnvironment, h: Harness) -> AgentOutput:
    with env.auto_time_skipping_disabled():
        return await h.client.execute_workflow(
            ResilientCallWorkflow.run,
            CallInput(
                role="plain",
                request=ChatRequest(messages=[Message(role="user", content=uuid.uuid4().hex)]),
            ),
            id=f"call-{uuid.uuid4().hex[:10]}",
            task_queue=h.task_queue,
            result_type=AgentOutput,
        )


async def test_out_of_budget_primary_fails_over_then_returns(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """One request a minute on the primary: the second call is answered by the standby
    with RATE_BUDGET (the primary never called), and a minute later the primary answers."""
    budgets = RateBudgets(endpoints={PRIMARY: RateBudget(requests_per_minute=1)})
    p = policy.model_copy(update={"rate_budgets": budgets})
    h, workers = await make_harness(ts_env.client, p)
    async with running(workers):
        first = await _call(ts_env, h)
        assert (first.route, first.tier) == (PRIMARY, 0)
        second = await _call(ts_env, h)
        assert second.route != PRIMARY and second.tier == 1
        assert ReasonCode.RATE_BUDGET in second.reason_codes
        assert [a.route for a in second.attempts if a.outcome != "skipped"] == [second.route]
        calls = await sim_admin.attempts(endpoint=PRIMARY)
        assert len(calls) == 1
        await ts_env.sleep(61)
        third = await _call(ts_env, h)
        assert (third.route, third.tier) == (PRIMARY, 0)
        assert ReasonCode.RATE_BUDGET not in third.reason_codes
