"""A role context ages out: a call later than the reuse age (workflow time, a timer on the
time-skipping server) reads its own."""

from __future__ import annotations

import uuid

from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.options import CallOptions
from agent_failover.testing.workflows import RepeatedCallInput, RepeatedCallWorkflow
from tests.workflows.conftest import make_harness, running
from tests.workflows.test_context_reuse_devserver import context_reads


async def _reads(env: WorkflowEnvironment, policy: PolicyConfig, gap_s: float) -> int:
    h, workers = await make_harness(env.client, policy)
    request = ChatRequest(messages=[Message(role="user", content=f"t {uuid.uuid4().hex}")])
    async with running(workers):
        handle = await h.client.start_workflow(
            RepeatedCallWorkflow.run,
            RepeatedCallInput(
                roles=["plain", "plain"],
                request=request,
                options=CallOptions(context_reuse_s=30.0),
                gap_s=gap_s,
            ),
            id=f"reuse-age-{uuid.uuid4().hex[:8]}",
            task_queue=h.task_queue,
            result_type=list[AgentOutput],
        )
        await handle.result()
        return len(await context_reads(handle))


async def test_a_context_older_than_the_reuse_age_is_read_again(
    ts_env: WorkflowEnvironment, policy: PolicyConfig
) -> None:
    """30 s of reuse: a call 10 s after the first reuses its context, one 45 s after
    reads its own."""
    assert await _reads(ts_env, policy, 10.0) == 1
    assert await _reads(ts_env, policy, 45.0) == 2
