"""Degraded re-runs on the dev server: a step served degraded while the primary was down
is re-run once the primary is back, and either revised or escalated.

The specialists here have one primary (gemini-flash) and one warm fallback (cheap-mini);
the task is a simulator golden task (``Reply with exactly: ALPHA``), so each endpoint's
accuracy decides whether the fallback's answer agrees with the primary's. The expiry test
runs in the time-skipping environment (its window passes at once).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig, RerunSettings
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.shadow import RerunStatus, StepRevision
from agent_failover.testing.harness import Harness, build_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    EscalationAction,
    EscalationDecision,
    EscalationState,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
    PipelineStatus,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from agent_failover.workflows.pipeline_escalation import RERUN_DISAGREED
from agent_failover.workflows.search_attributes import REVISION_STATE

pytestmark = pytest.mark.devserver

PRIMARY, FALLBACK = "gemini-flash", "cheap-mini"
SPECIALISTS = ("researcher", "analyst")


def _rerun_policy(policy: PolicyConfig) -> PolicyConfig:
    """Specialists on PRIMARY (tier 0) and FALLBACK (tier 2), re-run within a minute."""
    roles = dict(policy.roles)
    for name in SPECIALISTS:
        r = roles[name]
        roster = r.roster.model_copy(update={"tier0": [PRIMARY], "tier1": [], "tier2": [FALLBACK]})
        roles[name] = r.model_copy(
            update={
                "roster": roster,
                "hedging": r.hedging.model_copy(update={"enabled": False}),
                "rerun": RerunSettings(window_s=60.0, check_interval_s=1.0, min_agreement=0.7),
            }
        )
    return policy.model_copy(update={"roles": roles})


async def _run_until_rerun(h: Harness, sim: SimAdmin):
    """Start a pipeline with PRIMARY down; once it waits to re-run, bring PRIMARY back (a
    good probe, as the health monitor would record) and return the handle."""
    await sim.set_faults(PRIMARY, [{"kind": "overloaded"}])
    handle = await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task="Reply with exactly: ALPHA",
            options=PipelineOptions(max_subtasks=2, revision_rounds=0),
        ),
        id=f"pipe-rerun-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )
    for _ in range(300):
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.phase == "rerun":
            break
        await asyncio.sleep(0.1)
    assert st.phase == "rerun"
    assert (await handle.describe()).typed_search_attributes.get(REVISION_STATE) == "pending"
    await sim.clear(PRIMARY)
    probe = CallOutcome(route=PRIMARY, at=time.time(), ok=True, latency_ms=10.0, probe=True)
    await h.health.record(probe, h.policy.breaker_for(PRIMARY))
    return handle


async def test_degraded_steps_are_revised_when_the_primary_agrees(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """Specialists answered by the fallback are re-run on the restored primary; the answers
    agree, so each is recorded as revised (result, query and RevisionState)."""
    for ep in (PRIMARY, FALLBACK):
        await sim_admin.set_accuracy(ep, 1.0)
    h, workers = build_harness(dev_env.client, _rerun_policy(policy))
    async with running(workers):
        handle = await _run_until_rerun(h, sim_admin)
        result: PipelineResult = await handle.result()
        queried = await handle.query(
            AgentPipelineWorkflow.revisions, result_type=list[StepRevision]
        )
    degraded = [s.step for s in result.steps if s.output.role in SPECIALISTS]
    assert degraded and all(s.output.route == FALLBACK for s in result.steps if s.step in degraded)
    assert sorted(r.step for r in result.revisions) == sorted(degraded)
    for rev in result.revisions:
        assert rev.status is RerunStatus.REVISED and rev.agreement == 1.0
        assert rev.revised is not None and rev.revised.route == PRIMARY
        assert rev.revised.content.strip() == "ALPHA" and rev.original_tier == 2
    assert [r.step for r in queried] == [r.step for r in result.revisions]
    sa = (await handle.describe()).typed_search_attributes
    assert sa.get(REVISION_STATE) == "revised"


async def test_a_disagreeing_rerun_escalates(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """The fallback answered wrong: the primary's re-run disagrees, the pipeline escalates
    (trigger rerun_disagreed, retry refused), and the human's decision is recorded."""
    await sim_admin.set_accuracy(PRIMARY, 1.0)
    await sim_admin.set_accuracy(FALLBACK, 0.0)
    h, workers = build_harness(dev_env.client, _rerun_policy(policy))
    async with running(workers):
        handle = await _run_until_rerun(h, sim_admin)
        for _ in range(300):
            st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
            if st.escalation is EscalationState.PENDING:
                break
            await asyncio.sleep(0.1)
        assert st.pending_escalation is not None
        assert {b.trigger for b in st.pending_escalation.blocked_steps} == {RERUN_DISAGREED}
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(
                AgentPipelineWorkflow.resolve,
                EscalationDecision(action=EscalationAction.RETRY, operator="t"),
            )
        assert "retry does not apply" in str(refused.value.cause)
        await handle.execute_update(
            AgentPipelineWorkflow.resolve,
            EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="t"),
        )
        result: PipelineResult = await handle.result()
    assert result.revisions
    for rev in result.revisions:
        assert rev.status is RerunStatus.ESCALATED and (rev.agreement or 0.0) < 0.7
        assert rev.decision == "accept_degraded"
    assert result.escalation is EscalationState.RESOLVED
    sa = (await handle.describe()).typed_search_attributes
    assert sa.get(REVISION_STATE) == "escalated"


async def test_rerun_expires_when_the_primary_stays_down(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """Time-skipping: the primary never comes back within the window, so the degraded
    answers stand (status expired, RevisionState expired) and the run still completes."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    h, workers = build_harness(ts_env.client, _rerun_policy(policy))
    async with running(workers):
        handle = await h.client.start_workflow(
            AgentPipelineWorkflow.run,
            PipelineInput(
                task="Reply with exactly: ALPHA",
                options=PipelineOptions(max_subtasks=2, revision_rounds=0),
            ),
            id=f"pipe-rerun-{uuid.uuid4().hex[:10]}",
            task_queue=h.task_queue,
            result_type=PipelineResult,
        )
        result: PipelineResult = await handle.result()
        state = (await handle.describe()).typed_search_attributes.get(REVISION_STATE)
    assert result.revisions and state == "expired"
    assert {r.status for r in result.revisions} == {RerunStatus.EXPIRED}
    assert all(r.revised is None and "not restored" in r.detail for r in result.revisions)
    assert all(s.output.route == FALLBACK for s in result.steps if s.output.role in SPECIALISTS)
