"""``escalate`` in a workflow without ``EscalationHandlers``, on the time-skipping server:
its handlers come with its first escalation, a workflow's own reason escalates a healthy
answer, the role's ``min_confidence`` is the default floor, and unusable settings fail
the run with one line instead of retrying its task."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from pydantic import BaseModel
from temporalio import workflow
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from agent_failover import (
    ChatRequest,
    EscalationOutcome,
    Message,
    escalate,
    resilient_complete,
)
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import Capability, ReasonCode
from agent_failover.testing.escalations import NoEscalationError, wait_for_escalation
from agent_failover.testing.harness import Harness, make_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.escalate import INVALID_SETTINGS
from agent_failover.workflows.models import (
    EscalationAction,
    EscalationDecision,
    EscalationReceipt,
)


class Step(BaseModel):
    role: str = "critic"
    reason: str | None = None
    min_confidence: float | None = None
    settings: dict[str, str] = {}


@workflow.defn(name="EscalateProbe")
class EscalateProbe:
    """One call, then ``escalate`` on its answer; no ``EscalationHandlers``."""

    @workflow.run
    async def run(self, step: Step) -> EscalationOutcome:
        if step.settings:
            self.escalation_settings = step.settings
        request = ChatRequest(messages=[Message(role="user", content="Review the plan")])
        out = await resilient_complete(step.role, request)
        return await escalate(
            "check", out, {"n": 1}, min_confidence=step.min_confidence, reason=step.reason
        )


@pytest_asyncio.fixture
async def ts(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    critic = policy.role("critic").model_copy(update={"min_confidence": 0.9})
    policy = policy.model_copy(update={"roles": {**policy.roles, "critic": critic}})
    h, workers = await make_harness(ts_env.client, policy, workflows=[EscalateProbe])
    async with running(workers):
        yield h


async def _start(h: Harness, step: Step) -> WorkflowHandle:
    return await h.client.start_workflow(
        EscalateProbe.run,
        step,
        id=f"esc-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
        result_type=EscalationOutcome,
    )


async def test_a_reason_of_its_own_escalates_a_healthy_answer(
    ts_env: WorkflowEnvironment, ts: Harness
) -> None:
    """A tier-0 answer with ``reason=``: trigger ``requested``, the handlers registered at
    the first escalation, the decision through the update."""
    with ts_env.auto_time_skipping_disabled():
        handle = await _start(ts, Step(reason="refund over 500 EUR", min_confidence=0.0))
        st = await wait_for_escalation(handle)
        pe = st.pending_escalation
        assert pe is not None and pe.output.capability is Capability.FULL
        assert [(b.trigger, b.reason) for b in pe.blocked_steps] == [
            ("requested", "refund over 500 EUR")
        ]
        assert pe.state == {"n": 1} and st.workflow_type == "EscalateProbe"
        accept = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="me")
        await handle.execute_update("resolve", accept, result_type=EscalationReceipt)
        outcome = await handle.result()
    assert outcome.trigger == "requested" and outcome.escalated and not outcome.retry
    assert ReasonCode.ACCEPTED_DEGRADED in outcome.output.reason_codes


async def test_the_roles_min_confidence_is_the_default_floor(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """Tiers 0 and 1 down: the tier-2 answer (0.8) is below the role's 0.9, so it escalates
    (``low_confidence``); with ``min_confidence=0.5`` given, no human is asked."""
    roster = ts.policy.role("critic").roster
    for ep in (*roster.tier0, *roster.tier1):
        await sim_admin.set_faults(ep, [{"kind": "overloaded"}])
    with ts_env.auto_time_skipping_disabled():
        explicit = await (await _start(ts, Step(min_confidence=0.5))).result()
        assert explicit.decision is None and explicit.output.tier == 2
        handle = await _start(ts, Step())
        st = await wait_for_escalation(handle)
        assert [b.trigger for b in st.pending_escalation.blocked_steps] == ["low_confidence"]
        human = EscalationDecision(action=EscalationAction.PROVIDE_OUTPUT, output="ok")
        await handle.execute_update("resolve", human, result_type=EscalationReceipt)
        outcome = await handle.result()
    assert outcome.output.content == "ok" and outcome.output.route == "human"


async def test_unusable_settings_fail_the_run_with_one_line(ts: Harness) -> None:
    """``escalation_settings`` with an unknown timeout action: a non-retryable failure
    naming what to use, not a workflow task retried forever."""
    handle = await _start(ts, Step(reason="x", settings={"timeout_action": "shrug"}))
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == INVALID_SETTINGS
    assert "shrug" in cause.message and "accept_degraded" in cause.message


async def test_waiting_for_an_escalation_that_never_comes_fails_at_once(
    ts_env: WorkflowEnvironment, ts: Harness
) -> None:
    """``agent_failover.testing.wait_for_escalation`` on a healthy run that needs no human:
    it says so as soon as the run completes, instead of polling out its timeout."""
    with ts_env.auto_time_skipping_disabled():
        handle = await _start(ts, Step(min_confidence=0.0))
        await handle.result()
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(NoEscalationError, match="completed without escalating"):
            await wait_for_escalation(handle, timeout_s=60)
    assert loop.time() - began < 30
