"""Replay every committed history against today's workflow code (non-determinism guard)."""

from __future__ import annotations

import json
import traceback
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agent_failover.activities.policy_registry import POLICY_REGISTRY
from agent_failover.activities.policy_versions import load_versions
from agent_failover.service import workflow_runner
from agent_failover.stores.policies import DirectoryPolicyStore
from agent_failover.workflows.monitor import HealthMonitorWorkflow
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from agent_failover.workflows.qualify import QualifyWorkflow
from tests.workflows.helpers import ResilientCallWorkflow

HISTORIES = sorted((Path(__file__).resolve().parents[1] / "histories").glob("*.json"))
#: The policy versions the histories name by ref, committed beside them (a directory store).
POLICY_VERSIONS = Path(__file__).resolve().parents[1] / "histories" / "policies"


async def fresh_worker_policies() -> None:
    """The policy registry as in a fresh worker: only what its policy store holds (the
    committed versions); an older history's inline policies come from the history."""
    POLICY_REGISTRY.reset()
    await load_versions(DirectoryPolicyStore(POLICY_VERSIONS))


#: Every workflow type a committed history may hold (the tracing replay test uses it too).
REPLAY_WORKFLOWS = [
    AgentPipelineWorkflow,
    HealthMonitorWorkflow,
    ResilientCallWorkflow,
    QualifyWorkflow,
]


def test_histories_are_committed() -> None:
    """The replay suite covers a healthy, a failover, a hedged and a summarized run,
    specialists' tool calls rolled back by a failed action and unwound on a cancellation,
    an escalated run from before and after on-call notifications, a shadow-sampled call,
    a pipeline that re-ran its degraded steps, a call that skips an unqualified route, and a
    qualification run (continued as new, and its last run)."""
    names = {p.stem for p in HISTORIES}
    assert {
        "pipeline_healthy",
        "pipeline_failover",
        "call_hedged",
        "call_summarized",
        "pipeline_agent_tools_rollback",
        "pipeline_agent_tools_cancelled",
        "pipeline_escalation",
        "pipeline_escalation_notified",
        "call_shadowed",
        "pipeline_rerun",
        "call_unqualified",
        "qualify_continue_as_new",
        "qualify_final",
    } <= names
    # Issue 10: eager dispatch, a full bulkhead's overflow, policies sent once per run.
    assert {"call_eager_issue10", "call_overflow_issue10", "pipeline_policy_refs_issue10"} <= names
    # Role contexts without the workflow's own queue, the SLA window or an idle snapshot.
    assert {"call_own_queue", "pipeline_own_queue"} <= names
    # Hedge timers started in the attempt's own step (the worker-kill nondeterminism fix).
    assert {"pipeline_hedge_timer_in_step", "call_hedge_timer_in_step"} <= names
    # Policies by version: every role context names its policy by ref (the store has it).
    assert {"call_policy_store_issue10", "pipeline_policy_store_issue10"} <= names
    # Issue 10: monitor rounds timed from their start (patched), recorded before and after.
    assert {"monitor_rounds_pre_issue10", "monitor_rounds_issue10"} <= names
    # Issue 15a: an action and agent tools that applied, then timed out: maybe_applied undone.
    assert {
        "pipeline_action_maybe_applied_issue15a",
        "pipeline_agent_tools_maybe_applied_issue15a",
    } <= names


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays_deterministically(path: Path) -> None:
    """Replaying a recorded run with the current code raises no non-determinism error."""
    await fresh_worker_policies()
    data = json.loads(path.read_text())  # noqa: ASYNC240 - a small local file
    history = WorkflowHistory.from_json(path.stem, data)
    replayer = Replayer(
        workflows=REPLAY_WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


def test_every_history_workflow_type_is_replayed() -> None:
    """A history of a workflow type missing from ``REPLAY_WORKFLOWS`` would fail to replay."""
    known = {w.__name__ for w in REPLAY_WORKFLOWS}
    for path in HISTORIES:
        first = json.loads(path.read_text())["events"][0]
        name = first["workflowExecutionStartedEventAttributes"]["workflowType"]["name"]
        assert name in known, f"{path.name}: add {name} to REPLAY_WORKFLOWS"


async def test_a_history_whose_policy_version_is_missing_fails_its_task_naming_it() -> None:
    """Without the policy store's versions, a run naming its policy by ref cannot replay:
    the workflow task fails (not the run) with the missing ref and what to do."""
    path = POLICY_VERSIONS.parent / "call_policy_store_issue10.json"
    POLICY_REGISTRY.reset()  # a worker whose store never saw this version
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
    replayer = Replayer(
        workflows=REPLAY_WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    failure = result.replay_failure
    assert failure is not None
    text = "".join(traceback.format_exception(failure))
    (ref,) = {p.stem for p in POLICY_VERSIONS.glob("*.json")} & set(text.split())
    assert "PolicyVersionMissing" in text and "role 'plain'" in text
    await fresh_worker_policies()
    assert ref in POLICY_REGISTRY
