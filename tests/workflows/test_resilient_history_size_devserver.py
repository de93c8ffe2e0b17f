"""What one resilient call writes to history (a small one), on the dev server.

A call's history holds one role-context marker (with the in-flight lease it took for the
first attempt), one ``call_model`` (scheduled, started, completed, carrying that lease) and
no patch markers or ``TemporalChangeVersion`` upserts. No role context carries
a policy, only its ref (the worker's policy store holds the version); the snapshot holds
only what planning reads; an attempt derives its cache key from its request.
"""

from __future__ import annotations

import json
import uuid

import pytest

from agent_failover.activities.snapshot_history import UNPLANNED_FIELDS, UNPLANNED_STATS
from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.workflows.conftest import Harness
from tests.workflows.helpers import CallInput, ResilientCallWorkflow
from tests.workflows.test_resilient_failover_devserver import _request

pytestmark = pytest.mark.devserver


def _role_contexts(history) -> list[dict]:
    """The decoded JSON result of every role_context local activity, in order."""
    out = []
    for e in history.events:
        if not e.HasField("marker_recorded_event_attributes"):
            continue
        m = e.marker_recorded_event_attributes
        data = json.loads(m.details["data"].payloads[0].data) if "data" in m.details else {}
        if m.marker_name == "core_local_activity" and data.get("activity_type") == "role_context":
            out.append(json.loads(m.details["result"].payloads[0].data))
    return out


async def test_one_call_writes_no_patch_markers_and_a_compact_context(harness: Harness) -> None:
    wf_id = f"hist-{uuid.uuid4().hex[:10]}"
    await harness.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role="plain", request=_request()),
        id=wf_id,
        task_queue=harness.task_queue,
    )
    history = await harness.client.get_workflow_handle(wf_id).fetch_history()
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert "upsert_workflow_search_attributes_event_attributes" not in kinds
    markers = [
        e.marker_recorded_event_attributes.marker_name
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    assert markers == ["core_local_activity"]
    (ctx,) = _role_contexts(history)
    assert ctx["policy_ref"] and "policy" not in ctx and ctx["role"] == "plain"
    # Eager dispatch: the attempt runs on the workflow's own queue, which the workflow knows.
    assert "task_queue" not in ctx
    routes = ctx.get("snapshot", {}).get("routes", {})  # left out when every route is idle
    assert all("route" not in r for r in routes.values())  # the key is the name
    # Warmed by earlier tests or not, no route carries what planning never reads.
    assert not any(UNPLANNED_FIELDS & set(r) for r in routes.values())
    assert not any(UNPLANNED_STATS & set(r.get("stats", {})) for r in routes.values())
    scheduled = next(
        e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    )
    inp = json.loads(scheduled.activity_task_scheduled_event_attributes.input.payloads[0].data)
    assert "tool_calls" not in inp["request"]["messages"][0] and "output_schema" not in inp
    assert inp["cache"] == {"keep_s": harness.policy.roles["plain"].roster.cache.max_staleness_s}
    # The in-flight lease the role context took on the role's first route (in its snapshot's
    # round trip, issue 24), carried by the first attempt there (its route left out).
    lease = ctx["lease"]
    assert lease.pop("route") == harness.policy.routes_for("plain")[0] == inp["route"]
    assert inp["lease"] == lease


async def test_a_pipeline_names_every_policy_by_ref_from_the_store(harness: Harness) -> None:
    """In a pipeline, every role context carries its role's policy by ref only, and the
    worker's policy store holds every version the history names."""
    handle = await harness.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="Compare two queue designs", options=PipelineOptions()),
        id=f"pipe-{uuid.uuid4().hex[:10]}",
        task_queue=harness.task_queue,
        result_type=PipelineResult,
    )
    result: PipelineResult = await handle.result()
    contexts = _role_contexts(await handle.fetch_history())
    # One context per step; the planner may or may not give two subtasks the same role.
    assert len(contexts) == len(result.steps) >= len({c["role"] for c in contexts})
    assert not [c for c in contexts if "policy" in c]
    stored = await harness.policy_store.all()
    assert {c["policy_ref"] for c in contexts} <= set(stored)
