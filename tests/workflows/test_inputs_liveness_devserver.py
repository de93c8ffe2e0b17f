"""Every run ends, with a reason: bad workflow input and oversized or endless replies, on the
dev server, with workers configured as in production (no test-only failure types).

Each case asserts the run's final status and that it closed within its budget. Before these
changes, undecodable input retried its workflow task forever, and a 1 MiB reply wedged the
pipeline on Temporal's payload limit.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agent_failover.plugin import FailoverPlugin
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput, ReasonCode
from agent_failover.resilience.limits import PARTIAL_TEXT_TAIL_CHARS
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.factory import Stores
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.testing.harness import running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.workflows import ResilientCallWorkflow
from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
from agent_failover.workflows.pipeline import AgentPipelineWorkflow

pytestmark = pytest.mark.devserver

PRIMARY = "anthropic-us-east"
#: A bad start must end in well under this (it used to never end).
BAD_INPUT_BUDGET_S = 10.0
#: The plain role's whole budget (20 s) plus scheduling slack.
CALL_BUDGET_S = 25.0
#: planner + specialists + critic + synthesis, each well inside its own budget.
PIPELINE_BUDGET_S = 90.0
HUGE = {"kind": "oversized_output", "size_bytes": 1024 * 1024}
ENDLESS = {"kind": "oversized_output", "size_bytes": 64 * 1024 * 1024}
FAST = {"kind": "tokens_per_sec", "rate": 10_000_000}
STEADY = {"kind": "tokens_per_sec", "rate": 100_000}  # ~400 kB/s, for a minute and more


@pytest_asyncio.fixture
async def prod(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[tuple[Any, str]]:
    """A worker built the way the service builds one: the plugin, nothing test-only."""
    tq = f"live-{uuid.uuid4().hex[:10]}"
    stores = Stores(MemoryHealthStore(), MemoryResponseCache(), "test")
    plugin = FailoverPlugin(policy, stores=stores, start_monitor=False, include_pipeline=True)
    worker = Worker(
        dev_env.client, task_queue=tq, workflows=[ResilientCallWorkflow], plugins=[plugin]
    )
    async with running([worker]):
        yield dev_env.client, tq


async def _ended_within(handle: WorkflowHandle, budget_s: float) -> tuple[Any, float]:
    """The run's status and workflow seconds from start to close, once it ended in budget."""
    try:
        await asyncio.wait_for(asyncio.shield(handle.result()), budget_s)
    except WorkflowFailureError:
        pass
    except TimeoutError:
        await handle.terminate("liveness test: the run did not end in its budget")
        raise AssertionError(f"{handle.id} still running after {budget_s} s") from None
    desc = await handle.describe()
    assert desc.close_time is not None
    elapsed = (desc.close_time - desc.start_time).total_seconds()
    assert elapsed < budget_s
    return desc.status, elapsed


PIPELINE_OK = {"task": "Compare two queue designs"}
MONITOR_OK = {"routes": [PRIMARY]}
CALL_OK = {"role": "plain", "request": {"messages": [{"role": "user", "content": "hi"}]}}
BAD_INPUTS = [
    (name, label, args)
    for name, ok in (
        ("AgentPipelineWorkflow", PIPELINE_OK),
        ("HealthMonitorWorkflow", MONITOR_OK),
        ("ResilientCallWorkflow", CALL_OK),
    )
    for label, args in (
        ("bare-string", ["hello"]),
        ("list", [[1, 2, 3]]),
        ("extra-argument", [ok, "extra"]),
        ("no-argument", []),
        ("null", [None]),
        ("bad-fields", [{"nonsense": True}]),
    )
]


@pytest.mark.parametrize(
    ("workflow", "label", "args"), BAD_INPUTS, ids=[f"{w}-{lbl}" for w, lbl, _ in BAD_INPUTS]
)
async def test_undecodable_input_fails_the_run_at_once(
    prod, sim_admin: SimAdmin, workflow: str, label: str, args: list[Any]
) -> None:
    """Started with input it cannot use, each workflow fails within seconds with a
    non-retryable error naming what was wrong, and calls no model."""
    client, tq = prod
    handle = await client.start_workflow(
        workflow, args=args, id=f"bad-{label}-{uuid.uuid4().hex[:8]}", task_queue=tq
    )
    status, _ = await _ended_within(handle, BAD_INPUT_BUDGET_S)
    assert status is WorkflowExecutionStatus.FAILED
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable
    assert cause.type in ("invalid_workflow_input", "invalid_pipeline_input")
    assert workflow in str(cause) or "input" in str(cause)
    assert await sim_admin.attempts() == []


@pytest.mark.parametrize(
    ("label", "faults"), [("1MiB", [HUGE, FAST]), ("endless", [ENDLESS, STEADY])]
)
async def test_oversized_reply_fails_over_within_the_budget(
    prod, sim_admin: SimAdmin, label: str, faults: list[dict]
) -> None:
    """A 1 MiB reply, or a stream that never ends, fails its attempt as oversized_output
    with a bounded tail in its details; the call fails over and completes in budget."""
    client, tq = prod
    await sim_admin.set_faults(PRIMARY, faults)
    handle = await client.start_workflow(
        ResilientCallWorkflow.run,
        {"role": "plain", "request": ChatRequest(messages=[Message(role="user", content=label)])},
        id=f"big-{label}-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
        result_type=AgentOutput,
    )
    status, _ = await _ended_within(handle, CALL_BUDGET_S)
    assert status is WorkflowExecutionStatus.COMPLETED
    out: AgentOutput = await handle.result()
    first = out.attempts[0]
    assert first.route == PRIMARY and first.outcome == "oversized_output"
    assert out.route != PRIMARY and ReasonCode.SEMANTIC_FAILURE in out.reason_codes
    assert len(out.content) < 64 * 1024
    history = await handle.fetch_history()
    for event in history.events:
        if event.HasField("activity_task_failed_event_attributes"):
            failure = event.activity_task_failed_event_attributes.failure
            assert len(failure.application_failure_info.details.SerializeToString()) < (
                2 * PARTIAL_TEXT_TAIL_CHARS
            )


async def test_pipeline_with_a_runaway_primary_ends_with_an_answer(
    prod, sim_admin: SimAdmin
) -> None:
    """Every call to the primary answers 1 MiB: the pipeline fails each over and ends with
    an answer in budget (it used to wedge on the payload limit, retrying forever)."""
    client, tq = prod
    await sim_admin.set_faults(PRIMARY, [HUGE, FAST])
    handle = await client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="Assess a runaway model", options=PipelineOptions(revision_rounds=0)),
        id=f"pipe-big-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
        result_type=PipelineResult,
    )
    status, _ = await _ended_within(handle, PIPELINE_BUDGET_S)
    assert status is WorkflowExecutionStatus.COMPLETED
    result: PipelineResult = await handle.result()
    assert result.answer.strip() and all(s.output.route != PRIMARY for s in result.steps)
    oversized = [
        a for s in result.steps for a in s.output.attempts if a.outcome == "oversized_output"
    ]
    assert oversized and {a.route for a in oversized} == {PRIMARY}


async def test_recurring_role_context_error_ends_the_call(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error that is not a configuration error but keeps recurring in the role-context
    local activity (here a broken health store) ends the run after the activity's deadline,
    with the error, instead of retrying the local activity forever."""
    from datetime import timedelta

    from temporalio.common import RetryPolicy
    from temporalio.worker import UnsandboxedWorkflowRunner

    from agent_failover.workflows import planning

    class BrokenHealth(MemoryHealthStore):
        async def snapshot(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("health store exploded")

    # Unsandboxed, so the workflow sees the shortened policy (the sandbox would load its
    # own copy of the module); two quick attempts instead of six keep the test short.
    quick = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=2)
    monkeypatch.setattr(planning, "LOCAL_ACTIVITY_RETRY", quick)
    tq = f"ctx-{uuid.uuid4().hex[:10]}"
    stores = Stores(BrokenHealth(), MemoryResponseCache(), "test")
    plugin = FailoverPlugin(policy, stores=stores, start_monitor=False)
    worker = Worker(
        dev_env.client,
        task_queue=tq,
        workflows=[ResilientCallWorkflow],
        plugins=[plugin],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with running([worker]):
        handle = await dev_env.client.start_workflow(
            ResilientCallWorkflow.run,
            {"role": "plain", "request": {"messages": [{"role": "user", "content": "x"}]}},
            id=f"ctx-{uuid.uuid4().hex[:8]}",
            task_queue=tq,
        )
        status, _ = await _ended_within(handle, BAD_INPUT_BUDGET_S)
    assert status is WorkflowExecutionStatus.FAILED
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    chain, err = [], info.value.cause
    while err is not None:
        chain.append(f"{type(err).__name__}: {err}")
        err = getattr(err, "cause", None)
    assert any("exploded" in c for c in chain), chain
