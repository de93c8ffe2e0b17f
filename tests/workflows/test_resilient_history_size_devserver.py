"""What one resilient call writes to history (a small one), on the dev server.

A healthy call's history holds one ``first_call`` activity (scheduled, started, completed:
its input the caller's request, its result the role context with the first attempt's
answer), the one patch marker that says the run plans in its first attempt, no local
activity marker and no ``TemporalChangeVersion`` upserts. No role context carries
a policy, only its ref (the worker's policy store holds the version); the snapshot holds
only what planning reads; an attempt derives its cache key from its request.
"""

from __future__ import annotations

import json
import uuid

import pytest

from agent_failover.activities.snapshot_history import UNPLANNED_FIELDS, UNPLANNED_STATS
from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
from agent_failover.workflows.patches import PLAN_IN_FIRST_ATTEMPT
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.workflows.conftest import Harness
from tests.workflows.helpers import CallInput, ResilientCallWorkflow
from tests.workflows.test_resilient_failover_devserver import _request

pytestmark = pytest.mark.devserver


def _role_contexts(history) -> list[dict]:
    """The decoded JSON role context of every ``role_context`` local activity and every
    ``first_call`` activity (completed, or failed with the context attached), in order."""
    out, first_calls = [], set()
    for e in history.events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            if e.activity_task_scheduled_event_attributes.activity_type.name == "first_call":
                first_calls.add(e.event_id)
        elif e.HasField("activity_task_completed_event_attributes"):
            done = e.activity_task_completed_event_attributes
            if done.scheduled_event_id in first_calls:
                out.append(json.loads(done.result.payloads[0].data)["context"])
        elif e.HasField("marker_recorded_event_attributes"):
            m = e.marker_recorded_event_attributes
            data = json.loads(m.details["data"].payloads[0].data) if "data" in m.details else {}
            if (
                m.marker_name == "core_local_activity"
                and data.get("activity_type") == "role_context"
            ):
                out.append(json.loads(m.details["result"].payloads[0].data))
    return out


async def test_one_call_writes_one_activity_and_a_compact_context(harness: Harness) -> None:
    wf_id = f"hist-{uuid.uuid4().hex[:10]}"
    await harness.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role="plain", request=_request()),
        id=wf_id,
        task_queue=harness.task_queue,
    )
    history = await harness.client.get_workflow_handle(wf_id).fetch_history()
    upserts = [
        e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for e in history.events
        if e.HasField("upsert_workflow_search_attributes_event_attributes")
    ]
    # The patch's own (Temporal's core upserts TemporalChangeVersion on every new patch id).
    assert [list(u) for u in upserts] == [["TemporalChangeVersion"]]
    markers = [
        e.marker_recorded_event_attributes
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    assert [m.marker_name for m in markers] == ["core_patch"]
    assert PLAN_IN_FIRST_ATTEMPT.encode() in markers[0].SerializeToString()
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert [s.activity_type.name for s in scheduled] == ["first_call"]
    inp = json.loads(scheduled[0].input.payloads[0].data)
    assert inp["role"] == "plain" and "system" not in inp["request"]  # the caller's request
    (ctx,) = _role_contexts(history)
    assert ctx["policy_ref"] and "policy" not in ctx and ctx["role"] == "plain"
    # Eager dispatch: the attempt runs on the workflow's own queue, which the workflow knows.
    assert "task_queue" not in ctx
    routes = ctx.get("snapshot", {}).get("routes", {})  # left out when every route is idle
    assert all("route" not in r for r in routes.values())  # the key is the name
    # Warmed by earlier tests or not, no route carries what planning never reads.
    assert not any(UNPLANNED_FIELDS & set(r) for r in routes.values())
    assert not any(UNPLANNED_STATS & set(r.get("stats", {})) for r in routes.values())
    done = next(
        e.activity_task_completed_event_attributes
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
    )
    result = json.loads(done.result.payloads[0].data)
    # The attempt ran on the role's first route with the lease the context took there
    # (issue 24): the lease went with it, so the context in history keeps its record.
    assert result["route"] == harness.policy.routes_for("plain")[0]
    assert result["context"]["lease"]["route"] == result["route"]
    assert "endpoint" not in result["result"]["reply"]  # it is the route


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
