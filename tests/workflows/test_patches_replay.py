"""Replay every committed history against today's workflow code (non-determinism guard)."""

from __future__ import annotations

import ast
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
from agent_failover.workflows.patches import PATCHES
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from agent_failover.workflows.qualify import QualifyWorkflow
from tests.workflows.helpers import RepeatedCallWorkflow, ResilientCallWorkflow
from tests.workflows.record_histories import HISTORY_NAMES as RECORDED

HISTORIES = sorted((Path(__file__).resolve().parents[1] / "histories").glob("*.json"))
#: The workflow code whose patch ids :data:`workflows.patches.PATCHES` must list.
WORKFLOWS_DIR = Path(__file__).resolve().parents[2] / "workflows"
#: The policy versions the histories name by ref, committed beside them (a directory store).
POLICY_VERSIONS = Path(__file__).resolve().parents[1] / "histories" / "policies"


async def fresh_worker_policies() -> None:
    """The policy registry as in a fresh worker: only what its policy store holds (the
    committed versions)."""
    POLICY_REGISTRY.reset()
    await load_versions(DirectoryPolicyStore(POLICY_VERSIONS))


#: Every workflow type a committed history may hold (the tracing replay test uses it too).
REPLAY_WORKFLOWS = [
    AgentPipelineWorkflow,
    HealthMonitorWorkflow,
    ResilientCallWorkflow,
    RepeatedCallWorkflow,
    QualifyWorkflow,
]


#: One history per behaviour, each produced by ``tests/workflows/record_histories.py``.
EXPECTED_HISTORIES = {
    # The healthy pipeline (role contexts by policy ref, hedge timers cancelled in their
    # step), a failover, a hedged call and a call summarized before triage.
    "pipeline_healthy",
    "pipeline_failover",
    "call_hedged",
    "call_summarized",
    # An escalated run with no webhook configured, and one paging on-call.
    "pipeline_escalation",
    "pipeline_escalation_notified",
    # A planner answered from the cache with every route down: it escalates (cached_only).
    "pipeline_escalation_cached",
    # Specialists' tool calls rolled back by a failed action, and unwound on a cancellation.
    "pipeline_agent_tools_rollback",
    "pipeline_agent_tools_cancelled",
    # An action and agent tools that applied, then timed out: maybe_applied, undone.
    "pipeline_action_maybe_applied",
    "pipeline_agent_tools_maybe_applied",
    # A shadow-sampled call, and a pipeline that re-ran its degraded steps.
    "call_shadowed",
    "pipeline_rerun",
    # One specialists bulkhead slot: a pipeline sharing it, an eager call, an overflow.
    "pipeline_one_specialist_slot",
    "call_eager_dispatch",
    "call_bulkhead_overflow",
    # Monitor rounds that outlast their interval (timed from their start).
    "monitor_rounds",
    # A monitor brought to a new policy by its follow_policy update, continuing with it.
    "monitor_follows_policy",
    # A call waiting out a probe's short Retry-After on its primary (a timer, a patch).
    "call_waits_out_retry_after",
    # A call whose policy version comes from the policy store.
    "call_policy_store",
    # A call whose role context writes its snapshot read for the role (``role_read``).
    "call_role_read_snapshot",
    # A call that skips an unqualified route; a qualification run and its continuation.
    "call_unqualified",
    "qualify_continue_as_new",
    "qualify_final",
    # A 400 on one wire answered by another's route; a call answered by its tier-1 floor
    # attempt once its primary had spent the deadline.
    "call_invalid_request_other_wire",
    "call_live_tier_floor",
    # A call whose role context took its first attempt's in-flight lease (no patch: the
    # recorded context carries it; the histories above, recorded before, have none).
    "call_lease_with_snapshot",
    # Two calls of one role in one run, the second reusing the first's role context.
    "call_role_context_reused",
    # Role contexts read in the first attempt's activity (patch plan-in-first-attempt):
    # a healthy call, a 500 retried on its route by the workflow, a pipeline failing over.
    "call_first_attempt",
    "call_first_attempt_retried",
    "pipeline_first_attempt_failover",
}


def test_histories_are_committed() -> None:
    """The committed histories are exactly the ones the recorder produces: none missing,
    none left over from a recorder that no longer exists."""
    assert {p.stem for p in HISTORIES} == EXPECTED_HISTORIES
    assert RECORDED == EXPECTED_HISTORIES


def _patch_ids(root: Path) -> dict[str, str]:
    """Every id passed to ``workflow.patched`` / ``workflow.deprecate_patch`` in the
    modules under ``root``, with where it is used. An id is a string literal or a
    module-level constant of some module there (imported by name, or its own)."""
    trees = {p: ast.parse(p.read_text(), str(p)) for p in sorted(root.rglob("*.py"))}
    constants: dict[tuple[Path, str], str] = {}
    for path, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                        constants[(path, target.id)] = node.value.value
    found: dict[str, str] = {}
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"patched", "deprecate_patch"}
            ):
                continue
            where = f"{path.relative_to(root.parent)}:{node.lineno}"
            assert len(node.args) == 1, f"{where}: one patch id expected"
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found[arg.value] = where
                continue
            assert isinstance(arg, ast.Name), f"{where}: a literal or a constant expected"
            local = constants.get((path, arg.id))
            anywhere = {v for (_, name), v in constants.items() if name == arg.id}
            assert local or len(anywhere) == 1, f"{where}: cannot resolve {arg.id}"
            found[local or anywhere.pop()] = where
    return found


def test_every_patch_id_is_listed_in_patches() -> None:
    """Every ``workflow.patched`` / ``deprecate_patch`` id the workflows use is a key of
    ``workflows.patches.PATCHES``, which says why its old path still exists."""
    used = _patch_ids(WORKFLOWS_DIR)
    unlisted = {pid: where for pid, where in used.items() if pid not in PATCHES}
    assert unlisted == {}, f"add these to workflows/patches.py with a reason: {unlisted}"


def test_the_patch_scan_sees_literals_and_constants(tmp_path: Path) -> None:
    """The scan finds an id written inline, one named by the module's own constant and one
    by a constant imported from another module."""
    root = tmp_path / "workflows"
    root.mkdir()
    (root / "ids.py").write_text('SHARED = "shared-id"\n')
    (root / "a.py").write_text(
        "from temporalio import workflow\n"
        "from agent_failover.workflows.ids import SHARED\n"
        'OWN = "own-id"\n'
        "def f():\n"
        '    workflow.patched("inline-id")\n'
        "    workflow.deprecate_patch(OWN)\n"
        "    return workflow.patched(SHARED)\n"
    )
    assert set(_patch_ids(root)) == {"inline-id", "own-id", "shared-id"}


@pytest.mark.parametrize("strict", [False, True], ids=["passthrough", "strict-sandbox"])
@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays_deterministically(path: Path, strict: bool) -> None:
    """Replaying a recorded run with the current code raises no non-determinism error,
    with our modules passed through (as workers run) and under the strict sandbox (our
    workflow code re-imported for the run, every sandbox restriction applied to it)."""
    await fresh_worker_policies()
    data = json.loads(path.read_text())  # noqa: ASYNC240 - a small local file
    history = WorkflowHistory.from_json(path.stem, data)
    replayer = Replayer(
        workflows=REPLAY_WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(strict=strict),
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
    path = POLICY_VERSIONS.parent / "call_policy_store.json"
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
