"""The pipeline's trigger (a) on the dev server: a critical step answered from the response
cache, every model tier down, escalates even when the cached answer is fresh and above the
role's ``min_confidence`` (before: the pipeline went on with it, no human asked)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from agent_failover.resilience.contracts import ReasonCode
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
from tests.shipped import ALL_ENDPOINTS
from tests.workflows.conftest import Harness

pytestmark = pytest.mark.devserver
TASK = "Compare two ways to shard the orders table"


async def _start(h: Harness):
    return await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task=TASK, options=PipelineOptions(revision_rounds=0)),
        id=f"cached-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )


async def test_planner_answered_from_the_cache_escalates(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A healthy run fills the cache; with every endpoint down the same task's planner is
    answered from it (fresh, confidence 0.6 > 0.5) and the run pauses on ``cached_only``."""
    healthy = await (await _start(harness)).result()
    assert healthy.escalation is EscalationState.NONE
    for ep in ALL_ENDPOINTS:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    handle = await _start(harness)
    deadline = time.monotonic() + 60
    while True:
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.pending_escalation is not None or st.phase == "done":
            break
        assert time.monotonic() < deadline, st
        await asyncio.sleep(0.1)
    pe = st.pending_escalation
    assert pe is not None, "the planner's cached answer did not escalate"
    assert [(b.step, b.trigger) for b in pe.blocked_steps] == [("planner", "cached_only")]
    assert ReasonCode.CACHED_RESPONSE in pe.output.reason_codes
    assert pe.output.confidence >= 0.5 and "response cache" in pe.reason
    accept = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="oncall")
    await handle.execute_update(AgentPipelineWorkflow.resolve, accept)
    result = await handle.result()
    assert result.escalation is EscalationState.RESOLVED
    planner = result.steps[0].output
    assert ReasonCode.ACCEPTED_DEGRADED in planner.reason_codes
    assert planner.content == healthy.steps[0].output.content
