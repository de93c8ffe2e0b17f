"""What one resilient call writes to history (issue 10 §1 "small history"), on the dev server.

A call's history holds one role-context marker, one ``call_model`` (scheduled, started,
completed) and no patch markers or ``TemporalChangeVersion`` upserts; a run that calls the
same role again does not carry the role's policy a second time.
"""

from __future__ import annotations

import json
import uuid

import pytest

from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.workflows.conftest import Harness
from tests.workflows.helpers import CallInput, ResilientCallWorkflow
from tests.workflows.test_failover_devserver import _request

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
    assert ctx["policy_ref"] and "policy" in ctx and ctx["role"] == "plain"
    routes = ctx["snapshot"]["routes"]
    assert all("route" not in r for r in routes.values())  # the key is the name
    scheduled = next(
        e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    )
    inp = json.loads(scheduled.activity_task_scheduled_event_attributes.input.payloads[0].data)
    assert "tool_calls" not in inp["request"]["messages"][0] and "output_schema" not in inp


async def test_a_run_sends_each_role_policy_once(harness: Harness) -> None:
    """In a pipeline, a role called again gets its policy by ref: one copy per role per run."""
    handle = await harness.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="Compare two queue designs", options=PipelineOptions()),
        id=f"pipe-{uuid.uuid4().hex[:10]}",
        task_queue=harness.task_queue,
        result_type=PipelineResult,
    )
    result: PipelineResult = await handle.result()
    contexts = _role_contexts(await handle.fetch_history())
    assert len(contexts) == len(result.steps) > len({c["role"] for c in contexts})
    carried: dict[str, int] = {}
    for c in contexts:
        carried[c["policy_ref"]] = carried.get(c["policy_ref"], 0) + ("policy" in c)
    assert set(carried.values()) == {1}, carried
