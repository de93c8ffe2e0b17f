"""The escalating-review example (examples/escalating_review) escalates as its README says:
with every model tier down its critical review is answered from the cache, the run pauses
with its state (``EscalationState`` pending, the ``escalation`` query) and goes on with
the decision sent through the ``resolve`` update; nobody answering fails it with the
reason. Runs the example's own workflow on the time-skipping server with the simulator."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import Capability, ReasonCode
from agent_failover.testing.escalations import wait_for_escalation
from agent_failover.testing.harness import Harness, make_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.escalate import ESCALATION_TIMED_OUT
from agent_failover.workflows.models import (
    EscalationAction,
    EscalationDecision,
    EscalationReceipt,
    EscalationState,
    EscalationStatus,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "escalating_review"
sys.path.insert(0, str(EXAMPLE))

from review_workflows import ChangeReviewWorkflow, ReviewInput, ReviewResult  # noqa: E402

#: The shipped policy's critic: critical, min_confidence 0.5, cached for 10 min.
ROLE = "critic"
CHANGE = "Drain one region at a time during the rollout, keeping a rollback for each step."


@pytest_asyncio.fixture
async def ts(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    """A worker on the time-skipping server running the example's workflow."""
    h, workers = await make_harness(ts_env.client, policy, workflows=[ChangeReviewWorkflow])
    async with running(workers):
        yield h


async def _review(h: Harness, change: str = CHANGE) -> WorkflowHandle:
    return await h.client.start_workflow(
        ChangeReviewWorkflow.run,
        ReviewInput(change=change, role=ROLE),
        id=f"review-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
        result_type=ReviewResult,
    )


async def _outage(h: Harness, admin: SimAdmin) -> None:
    roster = h.policy.role(ROLE).roster
    for ep in (*roster.tier0, *roster.tier1, *roster.tier2):
        await admin.set_faults(ep, [{"kind": "overloaded"}])


async def test_review_from_the_cache_escalates_and_goes_on_with_the_decision(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """Healthy: no human needed. Every tier down: the same review comes from the (fresh,
    0.6-confident) cache, above min_confidence 0.5, and still escalates (``cached_only``)
    with the run's state; a refused early decision, then ``accept_degraded`` ends it."""
    with ts_env.auto_time_skipping_disabled():
        healthy = await (await _review(ts)).result()
        assert healthy.decision is None and healthy.answer.capability is Capability.FULL
        await _outage(ts, sim_admin)
        handle = await _review(ts)
        st = await wait_for_escalation(handle)
        pe = st.pending_escalation
        assert pe is not None and st.escalation is EscalationState.PENDING
        assert st.workflow_type == "ChangeReviewWorkflow"
        assert [b.trigger for b in pe.blocked_steps] == ["cached_only"]
        assert pe.output.tier == 3 and ReasonCode.CACHED_RESPONSE in pe.output.reason_codes
        assert pe.output.confidence >= ts.policy.role(ROLE).min_confidence
        assert pe.state == {"change": CHANGE} and pe.step == "review"
        assert pe.failover_history["review"] == pe.output.attempts
        bad = EscalationDecision(action=EscalationAction.PROVIDE_OUTPUT, operator="oncall")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("resolve", bad, result_type=EscalationReceipt)
        assert "provide_output needs the output text" in str(refused.value.cause)
        ok = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="oncall")
        receipt = await handle.execute_update("resolve", ok, result_type=EscalationReceipt)
        assert receipt.step == "review" and receipt.role == ROLE
        result = await handle.result()
    assert result.decision == "accept_degraded" and result.trigger == "cached_only"
    codes = result.answer.reason_codes
    assert ReasonCode.ESCALATED in codes and ReasonCode.ACCEPTED_DEGRADED in codes
    assert result.answer.content == healthy.answer.content
    after = await handle.query("escalation", result_type=EscalationStatus)
    assert after.escalation is EscalationState.RESOLVED and after.pending_escalation is None


async def test_retry_then_a_human_answer(
    ts_env: WorkflowEnvironment, ts: Harness, sim_admin: SimAdmin
) -> None:
    """``retry`` runs the step again (still all down: a second round); ``provide_output``
    then answers it with the human's text."""
    await _outage(ts, sim_admin)
    with ts_env.auto_time_skipping_disabled():
        handle = await _review(ts, "Rotate the signing keys without downtime.")
        first = await wait_for_escalation(handle)
        assert [b.trigger for b in first.pending_escalation.blocked_steps] == ["static_fallback"]
        retry = EscalationDecision(action=EscalationAction.RETRY, operator="oncall")
        await handle.execute_update("resolve", retry, result_type=EscalationReceipt)
        await asyncio.sleep(0.2)
        await wait_for_escalation(handle)
        human = EscalationDecision(
            action=EscalationAction.PROVIDE_OUTPUT, output="LGTM once keys are dual-signed."
        )
        await handle.execute_update("resolve", human, result_type=EscalationReceipt)
        result = await handle.result()
    assert result.attempts == 2 and result.decision == "provide_output"
    assert result.answer.content == "LGTM once keys are dual-signed."
    assert ReasonCode.HUMAN_PROVIDED in result.answer.reason_codes


async def test_nobody_answering_fails_the_run_with_the_reason(
    ts: Harness, sim_admin: SimAdmin
) -> None:
    """The example's timeout (one hour, action fail) is skipped through: the run fails
    non-retryably with ``escalation_timed_out``, naming the blocked step and why."""
    await _outage(ts, sim_admin)
    handle = await _review(ts, "Drop the legacy billing table.")
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == ESCALATION_TIMED_OUT
    assert "after 3600s" in cause.message and "review:" in cause.message
