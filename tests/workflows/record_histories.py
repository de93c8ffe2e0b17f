"""Record the workflow histories that the replay test checks (run by hand after a change).

    .venv/bin/python -m tests.workflows.record_histories [NAME ...] [--force]

Each recorder in ``RECORDERS`` runs workflows on a fresh dev server against the
simulator and returns the runs it recorded (:class:`Recorded`: a history name, the
workflow id and, for a run that continued as new, its run id); each history is written to
``tests/histories/NAME.json``, one history per behaviour. Existing files are kept (a
recorded history is never overwritten; ``--force`` overrides), so a new behaviour gets a
new file while the committed ones stay as recorded. With NAMEs only the recorders
producing those names run. Commit the files: replaying them in CI catches any workflow
change that would break running workflows (non-determinism).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

from temporalio.client import WorkflowExecutionStatus

from agent_failover.activities.health_models import ProbeInput
from agent_failover.activities.notify import WEBHOOK_SECRET_ENV, WEBHOOK_URL_ENV
from agent_failover.activities.policy_registry import POLICY_REGISTRY, policy_body
from agent_failover.cli.qualify import QualifyArgs, build_input
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.datasets import DATASETS_DIR
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.options import CallOptions
from agent_failover.resilience.qualification import (
    QualificationLock,
    RoleQualification,
    RouteQualification,
)
from agent_failover.stores.policies import check_version
from agent_failover.testing.roles import with_quality_roles
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.testing.webhook_receiver import WebhookReceiver
from agent_failover.testing.workflows import RepeatedCallInput, RepeatedCallWorkflow
from agent_failover.workflows import monitor
from agent_failover.workflows.models import (
    ActionSpec,
    AgentToolSpec,
    EscalationAction,
    EscalationDecision,
    EscalationState,
    MonitorInput,
    MonitorPolicy,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
    PipelineStatus,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from agent_failover.workflows.qualify import QualifyResult, QualifyWorkflow
from tests.shipped import ALL_ENDPOINTS
from tests.workflows.conftest import Harness, make_harness, running
from tests.workflows.helpers import CallInput, ResilientCallWorkflow, with_test_roles
from tests.workflows.test_rerun_devserver import _rerun_policy, _run_until_rerun
from tests.workflows.test_shadow_devserver import _golden, _shadowed

OUT = Path(__file__).resolve().parents[1] / "histories"
#: The policy versions the histories name by ref (``<ref>.json``, as a directory store).
POLICIES = OUT / "policies"


class Recorded(NamedTuple):
    """One recorded run: its history's name, its workflow id and, for a run that
    continued as new, its own run id (none: the workflow's latest run)."""

    name: str
    workflow_id: str
    run_id: str | None = None


Recorder = Callable[[Harness, SimAdmin], Awaitable[list[Recorded]]]


async def main(only: set[str], force: bool) -> None:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_dev_server(ui=False)
    admin = SimAdmin(sim.url)
    policy = with_quality_roles(with_test_roles(load_policy(DEFAULT_POLICY_PATH)))
    OUT.mkdir(exist_ok=True)
    try:
        for names, record in RECORDERS:
            if only and not only & set(names):
                continue
            # A fresh harness (its own stores) per recorder: breakers a recorder opened on
            # purpose (every route down) must not degrade the next recorder's runs.
            h, workers = await make_harness(env.client, policy)
            async with running(workers):
                for run in await record(h, admin):
                    await _write(h, run, force)
    finally:
        await admin.aclose()
        await env.shutdown()
        await sim.stop()


async def _write(h: Harness, run: Recorded, force: bool) -> None:
    path = OUT / f"{run.name}.json"
    if path.exists() and not force:
        print(f"kept {path} (recorded before; --force overwrites)")
        return
    handle = h.client.get_workflow_handle(run.workflow_id, run_id=run.run_id)
    history = await handle.fetch_history()
    path.write_text(history.to_json())
    print(f"wrote {path}")
    for ref in policy_refs_of(history):
        await _write_policy_version(ref)


def policy_refs_of(history: Any) -> list[str]:
    """The policy refs the run's role contexts name (in order, once each): local activity
    results (``role_context``), and ``first_call`` results and failure details."""
    refs: dict[str, None] = {}
    for data in _payload_dicts(history):
        ctx = data.get("context") if isinstance(data.get("context"), dict) else data
        if ctx.get("policy_ref"):
            refs[ctx["policy_ref"]] = None
    return list(refs)


def _payload_dicts(history: Any) -> list[dict[str, Any]]:
    """The JSON objects of every marker result, activity result and failure detail."""
    payloads = []
    for e in history.events:
        if e.HasField("marker_recorded_event_attributes"):
            m = e.marker_recorded_event_attributes
            if "result" in m.details:
                payloads.extend(m.details["result"].payloads)
        elif e.HasField("activity_task_completed_event_attributes"):
            payloads.extend(e.activity_task_completed_event_attributes.result.payloads)
        elif e.HasField("activity_task_failed_event_attributes"):
            failure = e.activity_task_failed_event_attributes.failure
            payloads.extend(failure.application_failure_info.details.payloads)
    out = []
    for p in payloads:
        try:
            data = json.loads(p.data)
        except ValueError:
            continue
        if isinstance(data, dict):
            out.append(data)
    return out


async def _write_policy_version(ref: str) -> None:
    """Commit the policy version a history names beside it (replay loads it, as a worker
    loads its policy store). Content addressed: the same ref is the same file."""
    path = POLICIES / f"{ref}.json"
    if path.exists():
        return
    body = policy_body(POLICY_REGISTRY[ref])
    check_version(ref, body)
    POLICIES.mkdir(exist_ok=True)
    path.write_text(body)
    print(f"wrote {path}")


async def _classic_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """The healthy and failover pipelines and the hedged call.

    The healthy pipeline also stands for what every run does now: its role contexts name
    the policy by ref (the policy store holds the version) and leave out the workflow's
    own queue, the SLA window and an all-idle snapshot; its hedged specialists answer
    before the hedge delay, so their hedge timers (started in the attempt's own step) are
    cancelled. The hedged call's hedge fires.
    """
    await admin.reset()
    runs = [Recorded("pipeline_healthy", await _pipeline(h, "healthy"))]
    await admin.set_faults("anthropic-us-east", [{"kind": "overloaded"}])
    await admin.set_faults("anthropic-eu-west", [{"kind": "stream_cut", "after_tokens": 4}])
    options = PipelineOptions(escalate_on_critical_degraded=False)
    wid = await _pipeline(
        h, "failover", PipelineInput(task="Assess a region evacuation", options=options)
    )
    runs.append(Recorded("pipeline_failover", wid))
    await admin.reset()
    await admin.set_faults("anthropic-us-east", [{"kind": "latency", "seconds": 1.5}])
    runs.append(Recorded("call_hedged", await _call(h, "hedged", "hedge me", "hedged")))
    await admin.reset()
    return runs


async def _summarized_run(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A request too big for the ``summarizing`` role's small window, with a pinned task."""
    await admin.reset()
    msgs = [Message(role="user", content="Task: plan the billing migration.", pinned=True)]
    for i in range(8):
        msgs.append(Message(role="assistant", content=f"step {i}: " + "detail " * 250))
        msgs.append(Message(role="user", content=f"noted {i}: " + "more " * 250))
    msgs.append(Message(role="user", content="What is the next step?"))
    wid = f"summarized-{uuid.uuid4().hex[:6]}"
    await h.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role="summarizing", request=ChatRequest(messages=msgs, max_tokens=120)),
        id=wid,
        task_queue=h.task_queue,
        result_type=AgentOutput,
    )
    return [Recorded("call_summarized", wid)]


def _tools_input() -> PipelineInput:
    title = {"type": "object", "properties": {"title": {"type": "string"}}}
    return PipelineInput(
        task="Handle the checkout outage",
        options=PipelineOptions(
            revision_rounds=0,
            max_subtasks=2,
            agent_tools=[
                AgentToolSpec(role=r, name="create_ticket", parameters=title)
                for r in ("researcher", "analyst")
            ],
            actions=[ActionSpec(tool="post_message", args={"channel": "#ops"})],
        ),
    )


async def _agent_tool_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """Specialists' tickets rolled back by a failed action; and unwound on a cancellation."""
    await admin.reset()
    await admin.set_tool_faults("post_message", [{"status": 400}])
    wid = f"tools-{uuid.uuid4().hex[:6]}"
    await h.client.execute_workflow(
        AgentPipelineWorkflow.run,
        _tools_input(),
        id=wid,
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )
    runs = [Recorded("pipeline_agent_tools_rollback", wid)]
    await admin.set_tool_faults("close_ticket", [{"status": 503}])
    wid = f"tools-cancel-{uuid.uuid4().hex[:6]}"
    handle = await h.client.start_workflow(
        AgentPipelineWorkflow.run, _tools_input(), id=wid, task_queue=h.task_queue
    )
    while True:
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.escalation is EscalationState.PENDING:
            break
        await asyncio.sleep(0.1)
    await admin.clear_tool_faults("close_ticket")
    await handle.cancel()
    try:
        await handle.result()
    except Exception as exc:  # the run ends cancelled, after its unwind
        print(f"{wid}: {type(exc).__name__}")
    runs.append(Recorded("pipeline_agent_tools_cancelled", wid))
    return runs


async def _maybe_applied_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """Effects that applied and then timed out: an action, then agent tools; both logged
    maybe_applied and compensated by their idempotency key."""
    hang = {"kind": "hang", "when": "after", "hold_s": 5}
    await admin.reset()
    await admin.set_tool_faults("post_message", [hang])
    wid = f"maybe-action-{uuid.uuid4().hex[:6]}"
    message = ActionSpec(
        tool="post_message", args={"channel": "#ops"}, max_attempts=1, timeout_s=0.5
    )
    await h.client.execute_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task="Summarise the outage",
            options=PipelineOptions(
                revision_rounds=0,
                actions=[ActionSpec(tool="create_ticket", args={"title": "incident"}), message],
            ),
        ),
        id=wid,
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )
    runs = [Recorded("pipeline_action_maybe_applied", wid)]
    await admin.reset()
    await admin.set_tool_faults("create_ticket", [hang])
    await admin.set_tool_faults("post_message", [{"status": 400}])
    inp = _tools_input()
    inp.options.agent_tools = [
        t.model_copy(update={"max_attempts": 1, "timeout_s": 0.5}) for t in inp.options.agent_tools
    ]
    wid = f"maybe-tools-{uuid.uuid4().hex[:6]}"
    await h.client.execute_workflow(
        AgentPipelineWorkflow.run, inp, id=wid, task_queue=h.task_queue, result_type=PipelineResult
    )
    runs.append(Recorded("pipeline_agent_tools_maybe_applied", wid))
    await admin.reset()
    return runs


async def _escalated(h: Harness, admin: SimAdmin) -> str:
    """Every route down: the pipeline escalates once; an operator accepts degraded."""
    await admin.reset()
    for ep in ALL_ENDPOINTS:
        await admin.set_faults(ep, [{"kind": "auth_error"}])
    wid = f"escalation-{uuid.uuid4().hex[:6]}"
    handle = await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="Plan a failover drill", options=PipelineOptions(revision_rounds=0)),
        id=wid,
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )
    while True:
        st = await handle.query(AgentPipelineWorkflow.status)
        if st.escalation.value == "pending":
            break
        await asyncio.sleep(0.1)
    accept = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="recorder")
    await handle.execute_update(AgentPipelineWorkflow.resolve, accept)
    await handle.result()
    await admin.reset()
    return wid


async def _escalation_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """An escalated run with no webhook configured (its notifications are skipped), then
    one paging a local receiver."""
    runs = [Recorded("pipeline_escalation", await _escalated(h, admin))]
    async with WebhookReceiver("recorder-secret") as rx:
        os.environ[WEBHOOK_URL_ENV] = rx.url
        os.environ[WEBHOOK_SECRET_ENV] = "recorder-secret"
        try:
            runs.append(Recorded("pipeline_escalation_notified", await _escalated(h, admin)))
        finally:
            os.environ.pop(WEBHOOK_URL_ENV, None)
            os.environ.pop(WEBHOOK_SECRET_ENV, None)
        assert len(rx.accepted()) == 2, rx.received
    return runs


async def _cached_escalation_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A healthy run fills the cache; with every route down the same task's planner is
    answered from it and escalates (``cached_only``); an operator accepts degraded."""
    await admin.reset()
    task = "Compare two ways to shard the orders table"
    inp = PipelineInput(task=task, options=PipelineOptions(revision_rounds=0))
    await _pipeline(h, "cached-fill", inp)
    for ep in ALL_ENDPOINTS:
        await admin.set_faults(ep, [{"kind": "auth_error"}])
    wid = f"escalation-cached-{uuid.uuid4().hex[:6]}"
    handle = await h.client.start_workflow(
        AgentPipelineWorkflow.run, inp, id=wid, task_queue=h.task_queue
    )
    while True:
        st = await handle.query(AgentPipelineWorkflow.status)
        if st.escalation.value == "pending":
            break
        await asyncio.sleep(0.1)
    assert [b.trigger for b in st.pending_escalation.blocked_steps] == ["cached_only"]
    accept = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="recorder")
    await handle.execute_update(AgentPipelineWorkflow.resolve, accept)
    await handle.result()
    await admin.reset()
    return [Recorded("pipeline_escalation_cached", wid)]


async def _quality_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A shadow-sampled call and a pipeline whose degraded steps were revised, each on its
    own worker: their policies differ from the shared one."""
    await admin.reset()
    hs, workers = await make_harness(h.client, _shadowed(h.policy))
    async with running(workers):
        wid = f"shadowed-{uuid.uuid4().hex[:6]}"
        await hs.client.execute_workflow(
            ResilientCallWorkflow.run,
            CallInput(role="plain", request=_golden(0)),
            id=wid,
            task_queue=hs.task_queue,
            result_type=AgentOutput,
        )
    runs = [Recorded("call_shadowed", wid)]
    await admin.reset()
    for ep in ("gemini-flash", "cheap-mini"):  # the re-run agrees: a revision
        await admin.set_accuracy(ep, 1.0)
    hr, workers = await make_harness(h.client, _rerun_policy(h.policy))
    async with running(workers):
        handle = await _run_until_rerun(hr, admin)
        await handle.result()
    runs.append(Recorded("pipeline_rerun", handle.id))
    await admin.reset()
    return runs


async def _bulkhead_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """On the shipped roles with one ``specialists`` bulkhead slot: a pipeline whose
    parallel specialists share the slot, an eagerly dispatched call, and a call its full
    bulkhead sent to the bulkhead's queue."""
    await admin.reset()
    policy = with_test_roles(load_policy(DEFAULT_POLICY_PATH))  # the shipped roles only
    he, workers = await make_harness(h.client, policy, bulkhead_slots={"specialists": 1})
    async with running(workers):
        runs = [Recorded("pipeline_one_specialist_slot", await _pipeline(he, "one-slot"))]
        runs.append(Recorded("call_eager_dispatch", await _call(he, "plain", "eager")))
        await admin.set_faults("anthropic-us-east", [{"kind": "latency", "seconds": 1.0}])
        first = asyncio.create_task(_call(he, "plain", "hold"))
        await asyncio.sleep(0.5)  # the only specialists slot is taken: the next overflows
        runs.append(Recorded("call_bulkhead_overflow", await _call(he, "plain", "overflow")))
        await first
        await admin.reset()
    return runs


async def _monitor_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """One monitor run (three rounds, then continue-as-new) whose probe rounds outlast the
    1 s interval: a slow primary (rounds are timed from their start)."""
    await admin.reset()
    await admin.set_faults("anthropic-us-east", [{"kind": "latency", "seconds": 1.5}])
    wid = f"monitor-{uuid.uuid4().hex[:6]}"
    handle = await h.client.start_workflow(
        monitor.HealthMonitorWorkflow.run,
        MonitorInput(
            routes=["anthropic-us-east", "openai-us"], interval_s=1.0, iterations_per_run=3
        ),
        id=wid,
        task_queue=h.task_queue,
    )
    first = h.client.get_workflow_handle(wid, run_id=handle.result_run_id)
    await _until_continued_as_new(first)
    await handle.terminate()
    await admin.reset()
    return [Recorded("monitor_rounds", wid, handle.result_run_id)]


async def _monitor_follow_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A monitor started with one route, brought to a policy with two by the
    ``follow_policy`` update, then continuing as new with both (issue 22 §1.6)."""
    await admin.reset()
    wid = f"monitor-follow-{uuid.uuid4().hex[:6]}"
    handle = await h.client.start_workflow(
        monitor.HealthMonitorWorkflow.run,
        MonitorInput(routes=["openai-us"], interval_s=1.0, iterations_per_run=3),
        id=wid,
        task_queue=h.task_queue,
    )
    grown = MonitorPolicy(
        routes=["anthropic-us-east", "openai-us"],
        interval_s=1.0,
        policy_ref="0123456789abcdef",
        since=time.time(),
    )
    await handle.execute_update(monitor.HealthMonitorWorkflow.follow_policy, grown)
    first = h.client.get_workflow_handle(wid, run_id=handle.result_run_id)
    await _until_continued_as_new(first)
    await handle.terminate()
    return [Recorded("monitor_follows_policy", wid, handle.result_run_id)]


async def _probe_retry_after_run(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A probe meets a 429 with a short Retry-After on the primary; the next call waits it
    out (a timer) and is answered by the primary (issue 22 §1.7)."""
    await admin.reset()
    await admin.set_faults("anthropic-us-east", [{"kind": "rate_limit", "retry_after": 1.5}])
    probe = ProbeInput(route="anthropic-us-east", now=time.time(), interval_s=10)
    await h.activities.probes.probe_endpoint(probe)
    await admin.clear()
    return [Recorded("call_waits_out_retry_after", await _call(h, "plain", "after a 429"))]


async def _until_continued_as_new(handle: Any) -> None:
    """Wait (up to a minute) until the run behind ``handle`` continued as new."""
    for _ in range(120):
        if (await handle.describe()).status is WorkflowExecutionStatus.CONTINUED_AS_NEW:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"{handle.id} did not continue as new")


async def _qualification_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A call whose primary the qualification lock marks unqualified (skipped, with its
    quality), and a qualification run of the critic's golden set that continues as new
    once: its first run and its last."""
    await admin.reset()
    verdict = RouteQualification(quality=0.4, pass_rate=0.4, items=20, errors=0, qualified=False)
    entry = RoleQualification(
        golden_set="plain.jsonl",
        golden_hash="0123456789abcdef",
        scorer="normalized",
        min_quality=0.85,
        qualified_at="2026-11-30T12:00:00+00:00",
        routes={"anthropic-us-east": verdict},
    )
    locked = h.policy.with_qualification(QualificationLock(roles={"plain": entry}))
    hq, workers = await make_harness(h.client, locked)
    async with running(workers):
        runs = [Recorded("call_unqualified", await _call(hq, "plain", "hi", "call-unq"))]
    args = QualifyArgs("critic", None, 0.85, None, None, None, 2, False)
    golden = build_input(args, h.policy, DATASETS_DIR / "critic.jsonl")
    # 3 items x 2 routes, continued as new after 4: two runs.
    inp = golden.model_copy(
        update={
            "items": golden.items[:3],
            "routes": ["anthropic-us-east", "cheap-mini"],
            "concurrency": 2,
            "item_timeout_s": 6.0,
            "continue_as_new_every": 4,
        }
    )
    wid = f"qualify-rec-{uuid.uuid4().hex[:6]}"
    handle = await h.client.start_workflow(
        QualifyWorkflow.run, inp, id=wid, task_queue=h.task_queue, result_type=QualifyResult
    )
    await handle.result()
    runs.append(Recorded("qualify_continue_as_new", wid, handle.result_run_id))
    runs.append(Recorded("qualify_final", wid))
    return runs


async def _policy_store_run(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A plain call whose role context names its policy by ref only (the version comes
    from the policy store; ``tests/histories/policies/`` holds it)."""
    await admin.reset()
    return [Recorded("call_policy_store", await _call(h, "plain", "by ref"))]


async def _failover_rule_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A 400 on the primary's wire answered on another wire (patch
    ``invalid-request-per-wire``), and a call whose primary ate its 3 s deadline, answered
    by its tier-1 floor attempt (patch ``live-tier-floor``)."""
    await admin.reset()
    await admin.set_faults("anthropic-us-east", [{"kind": "http_error", "status": 400}])
    runs = [Recorded("call_invalid_request_other_wire", await _call(h, "plain", "bad param"))]
    await admin.set_faults("anthropic-us-east", [{"kind": "slow_first_token", "seconds": 30}])
    wid = f"floor-{uuid.uuid4().hex[:6]}"
    await h.call("plain", "floor", options=CallOptions(deadline_ms=3000), workflow_id=wid)
    runs.append(Recorded("call_live_tier_floor", wid))
    await admin.reset()
    return runs


async def _role_read_run(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A plain call after a few on the same role: its snapshot, read for the role, writes
    the primary's numbers once and leaves the idle routes out (``role_read``)."""
    await admin.reset()
    for i in range(3):
        await _call(h, "plain", f"warm {i}")
    return [Recorded("call_role_read_snapshot", await _call(h, "plain", "role read"))]


async def _lease_run(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """A plain call whose role context took the in-flight lease on the primary in its
    snapshot's round trip, carried by its first attempt (issue 24: no patch, the recorded
    context says whether there is a lease; contexts recorded before have none)."""
    await admin.reset()
    return [Recorded("call_lease_with_snapshot", await _call(h, "plain", "leased"))]


async def _context_reuse_run(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """Two calls of one role in one run: the second plans from the first's role context
    (one ``role_context`` local activity; patch ``role-context-reuse``)."""
    await admin.reset()
    wid = f"reuse-{uuid.uuid4().hex[:6]}"
    request = ChatRequest(messages=[Message(role="user", content="reused context")])
    await h.client.execute_workflow(
        RepeatedCallWorkflow.run,
        RepeatedCallInput(roles=["plain", "plain"], request=request),
        id=wid,
        task_queue=h.task_queue,
        result_type=list[AgentOutput],
    )
    return [Recorded("call_role_context_reused", wid)]


async def _first_attempt_runs(h: Harness, admin: SimAdmin) -> list[Recorded]:
    """Calls whose role context is read in their first attempt's activity (issue 24,
    patch ``plan-in-first-attempt``): a healthy one (the attempt ran there), one whose
    primary returned a 500 (the workflow's same-route retry after a timer, then the
    standby), and a pipeline with its primary overloaded (each step fails over)."""
    await admin.reset()
    runs = [Recorded("call_first_attempt", await _call(h, "plain", "first attempt"))]
    await admin.set_faults("anthropic-us-east", [{"kind": "server_error"}])
    runs.append(Recorded("call_first_attempt_retried", await _call(h, "plain", "a 500")))
    await admin.set_faults("anthropic-us-east", [{"kind": "overloaded"}])
    runs.append(Recorded("pipeline_first_attempt_failover", await _pipeline(h, "first")))
    await admin.reset()
    return runs


async def _pipeline(h: Harness, prefix: str, inp: PipelineInput | None = None) -> str:
    """Run one pipeline (by default the healthy demo task) to its end; its workflow id."""
    wid = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await h.client.execute_workflow(
        AgentPipelineWorkflow.run,
        inp or PipelineInput(task="Compare two queue designs"),
        id=wid,
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )
    return wid


async def _call(h: Harness, role: str, text: str, prefix: str | None = None) -> str:
    """One call of ``role`` with ``text`` as the user message, to its end; its workflow id
    (``prefix``, by default the text, and a random suffix)."""
    wid = f"{prefix or text}-{uuid.uuid4().hex[:6]}"
    await h.call(role, text, workflow_id=wid)
    return wid


#: (the history names a recorder produces, the recorder), in recording order.
RECORDERS: list[tuple[tuple[str, ...], Recorder]] = [
    (("pipeline_healthy", "pipeline_failover", "call_hedged"), _classic_runs),
    (("call_summarized",), _summarized_run),
    (("pipeline_escalation", "pipeline_escalation_notified"), _escalation_runs),
    (("pipeline_escalation_cached",), _cached_escalation_runs),
    (("pipeline_agent_tools_rollback", "pipeline_agent_tools_cancelled"), _agent_tool_runs),
    (("call_shadowed", "pipeline_rerun"), _quality_runs),
    (
        ("pipeline_one_specialist_slot", "call_eager_dispatch", "call_bulkhead_overflow"),
        _bulkhead_runs,
    ),
    (("monitor_rounds",), _monitor_runs),
    (("monitor_follows_policy",), _monitor_follow_runs),
    (("call_waits_out_retry_after",), _probe_retry_after_run),
    (
        ("pipeline_action_maybe_applied", "pipeline_agent_tools_maybe_applied"),
        _maybe_applied_runs,
    ),
    (("call_policy_store",), _policy_store_run),
    (("call_role_read_snapshot",), _role_read_run),
    (("call_unqualified", "qualify_continue_as_new", "qualify_final"), _qualification_runs),
    (("call_invalid_request_other_wire", "call_live_tier_floor"), _failover_rule_runs),
    (("call_lease_with_snapshot",), _lease_run),
    (("call_role_context_reused",), _context_reuse_run),
    (
        ("call_first_attempt", "call_first_attempt_retried", "pipeline_first_attempt_failover"),
        _first_attempt_runs,
    ),
]
#: Every history the recorders produce (the replay test expects exactly these).
HISTORY_NAMES = frozenset(name for names, _ in RECORDERS for name in names)


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main({a for a in args if a != "--force"}, "--force" in args))
