"""PydanticAI's current Temporal path (the ``TemporalDurability`` capability) with agent-failover:
an ``Agent(FailoverModel(role), capabilities=[FailoverDurability()])`` run in a workflow on the
time-skipping server, its primary down (and the same for the deprecated ``TemporalAgent`` path,
``FailoverTemporalAgent``). Each model attempt is its own ``call_model``
activity in the run's history (the primary's failure, then the standby's answer), the tool
is PydanticAI's tool activity, PydanticAI's one-activity model request never appears, and
``escalate`` takes the agent's last answer."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("pydantic_ai", reason="extra [pydantic-ai] not installed")

import pytest_asyncio
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio import workflow
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agent_failover import AgentOutput, EscalationOutcome, escalate
from agent_failover.contrib.pydantic_ai import (
    FailoverDurability,
    FailoverModel,
    FailoverTemporalAgent,
    failover_outputs,
)
from agent_failover.resilience.config import PolicyConfig
from agent_failover.testing.escalations import wait_for_escalation
from agent_failover.testing.harness import Harness, make_harness, running
from agent_failover.testing.history import activity_rows
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    EscalationAction,
    EscalationDecision,
    EscalationReceipt,
)


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"rain in {city}"


def _agent(name: str, **kwargs: object) -> Agent:
    instructions = "Use the tool, then answer briefly."
    return Agent(FailoverModel("plain"), name=name, instructions=instructions, **kwargs)


#: The current path: PydanticAI's capability, as ``FailoverDurability``.
durable = _agent("durable_plain", tools=[get_weather], capabilities=[FailoverDurability()])
#: The deprecated path: PydanticAI's ``TemporalAgent``, as ``FailoverTemporalAgent``.
legacy = FailoverTemporalAgent(_agent("legacy_plain", tools=[get_weather]))
AGENTS = {"capability": durable, "temporal_agent": legacy}


class Question(BaseModel):
    text: str
    reason: str | None = None
    path: str = "capability"


class Answer(BaseModel):
    output: str
    model_calls: list[AgentOutput]
    outcome: EscalationOutcome


@workflow.defn(name="DurableAgentProbe")
class DurableAgentProbe:
    """The agent on the current durability path, then ``escalate`` on its last answer."""

    __pydantic_ai_agents__ = list(AGENTS.values())  # PydanticAIPlugin: their tool activities

    @workflow.run
    async def run(self, q: Question) -> Answer:
        result = await AGENTS[q.path].run(q.text)
        calls = failover_outputs(result)
        outcome = await escalate("answer", calls[-1], {"q": q.text}, reason=q.reason)
        return Answer(output=str(result.output), model_calls=calls, outcome=outcome)


@pytest_asyncio.fixture
async def ts(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    for endpoint in policy.role("plain").roster.tier0:  # the primary is down
        await sim_admin.set_faults(endpoint, [{"kind": "overloaded"}])
    h, workers = await make_harness(
        ts_env.client, policy, workflows=[DurableAgentProbe], plugins=[PydanticAIPlugin()]
    )
    async with running(workers):
        yield h


async def _start(h: Harness, q: Question) -> WorkflowHandle:
    return await h.client.start_workflow(
        DurableAgentProbe.run,
        q,
        id=f"durable-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
        result_type=Answer,
    )


@pytest.mark.parametrize("path", sorted(AGENTS))
async def test_the_standby_answers_each_attempt_an_activity(
    ts_env: WorkflowEnvironment, ts: Harness, path: str
) -> None:
    """Primary down: every model request fails over to tier 1, attempt by attempt in history."""
    with ts_env.auto_time_skipping_disabled():
        handle = await _start(ts, Question(text="Weather in Lyon?", path=path))
        answer = await handle.result()
    tier0 = set(ts.policy.role("plain").roster.tier0)
    assert len(answer.model_calls) == 2  # the tool call, then the text answer
    for call in answer.model_calls:
        assert call.tier == 1 and call.role == "plain", call
        assert call.attempts[0].outcome == "overloaded" and call.attempts[-1].outcome == "ok"
    assert answer.outcome.decision is None and answer.output  # no human was needed
    rows = await activity_rows(handle)
    # one activity per attempt (each call's first: first_call), in order: nothing hidden
    attempts = [(a.route, a.outcome) for c in answer.model_calls for a in c.attempts]
    assert attempts[0][0] in tier0 and len(attempts) == 4
    seen = [
        (
            r.summary.removeprefix("plain → ").split(" (")[0],
            "ok" if r.outcome == "completed" else r.outcome,
        )
        for r in rows
        # A first_call that returned the role context only ran no attempt.
        if r.activity_type == "call_model"
        or (r.activity_type == "first_call" and "(tier" in r.summary)
    ]
    assert seen == attempts
    assert any(r.activity_type.endswith("__call_tool") for r in rows)  # PydanticAI's tool
    assert not [r for r in rows if "model_request" in r.activity_type]


async def test_escalate_takes_the_agents_last_answer(
    ts_env: WorkflowEnvironment, ts: Harness
) -> None:
    """``escalate`` with a reason pauses the run on the agent's answer; a human accepts it."""
    with ts_env.auto_time_skipping_disabled():
        handle = await _start(ts, Question(text="Refund?", reason="refund over 500 EUR"))
        st = await wait_for_escalation(handle)
        pending = st.pending_escalation
        assert pending is not None and pending.output.tier == 1
        assert pending.state == {"q": "Refund?"}
        accept = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="me")
        await handle.execute_update("resolve", accept, result_type=EscalationReceipt)
        answer = await handle.result()
    assert answer.outcome.escalated and answer.outcome.trigger == "requested"
    assert answer.outcome.output.route == answer.model_calls[-1].route
