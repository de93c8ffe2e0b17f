"""On-call notifications of escalations on the dev server, and a paused run that outlives
its worker.

The worker posts to a local receiver (127.0.0.1, free port) that verifies the HMAC; its
URL and secret come from the worker's environment, never from the workflow. A webhook
that fails is retried by Temporal (5xx) or given up (4xx) without failing the run, and
without a URL the notification is a no-op that says so.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from agent_failover.activities.notify import UI_URL_ENV, WEBHOOK_SECRET_ENV, WEBHOOK_URL_ENV
from agent_failover.cli.ops import resolve_escalation
from agent_failover.resilience.contracts import ReasonCode
from agent_failover.testing.harness import build_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.webhook_receiver import WebhookReceiver
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
SECRET = "test-webhook-secret"
ALL = ALL_ENDPOINTS
ACCEPT = EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED, operator="oncall", note="ok")


@pytest_asyncio.fixture
async def receiver(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[WebhookReceiver]:
    """A receiver checking signatures; the in-process workers read its URL from the env."""
    async with WebhookReceiver(SECRET) as rx:
        monkeypatch.setenv(WEBHOOK_URL_ENV, rx.url)
        monkeypatch.setenv(WEBHOOK_SECRET_ENV, SECRET)
        monkeypatch.setenv(UI_URL_ENV, "http://ui.test:8233")
        yield rx


async def _all_down(admin: SimAdmin) -> None:
    for ep in ALL:
        await admin.set_faults(ep, [{"kind": "auth_error"}])


async def _start(h: Harness) -> WorkflowHandle:
    return await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task="Plan a failover drill",
            options=PipelineOptions(revision_rounds=0, escalation_timeout_s=600),
        ),
        id=f"notify-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )


async def _until_pending(handle: WorkflowHandle, timeout_s: float = 20.0) -> PipelineStatus:
    deadline = time.monotonic() + timeout_s
    while True:
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.pending_escalation is not None:
            return st
        assert time.monotonic() < deadline, f"never paused (phase {st.phase})"
        await asyncio.sleep(0.1)


async def test_worker_killed_while_paused_run_resumes_on_a_new_worker(
    dev_env, policy, sim_admin: SimAdmin, receiver: WebhookReceiver
) -> None:
    """Paused on escalation (on-call notified), the worker dies abruptly; a new worker on the
    same queue takes the decision through the `resolve` update and the run completes from
    where it paused: the planner's answer is the one kept at the pause (not re-run), the
    later steps run once, and the resolved notification comes from the new worker."""
    await _all_down(sim_admin)
    old, old_workers = build_harness(dev_env.client, policy)
    tasks = [asyncio.create_task(w.run()) for w in old_workers]
    handle = await _start(old)
    st = await _until_pending(handle)
    pending = st.pending_escalation
    assert pending is not None and pending.step == "planner" and pending.completed_steps == []
    opened = await receiver.wait_for("escalation.opened", handle.id)
    assert opened.verified is True
    assert (opened.payload or {})[
        "resolve_command"
    ] == f"failover resolve {handle.id} accept_degraded"
    before = await sim_admin.attempts()

    for t in tasks:  # abrupt: no graceful shutdown, the cached workflow is lost
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await sim_admin.clear()  # providers back: what runs after the pause answers on tier 0

    # A new worker: new objects, fresh stores, the same task queue.
    _, new_workers = build_harness(dev_env.client, policy, task_queue=old.task_queue)
    async with running(new_workers):
        receipt = await resolve_escalation(dev_env.client, handle.id, ACCEPT)
        result: PipelineResult = await asyncio.wait_for(handle.result(), 60)
    assert receipt.step == "planner" and receipt.action is EscalationAction.ACCEPT_DEGRADED

    planner = result.steps[0]
    assert planner.step == "planner"
    assert planner.output.attempts == pending.output.attempts, "the planner ran again"
    assert ReasonCode.ACCEPTED_DEGRADED in planner.output.reason_codes
    assert all(s.output.tier == 0 for s in result.steps[1:])
    after = (await sim_admin.attempts())[len(before) :]
    assert len(after) == len(result.steps) - 1 and all(a.outcome == "ok" for a in after)
    assert result.escalation is EscalationState.RESOLVED

    resolved = await receiver.wait_for("escalation.resolved", handle.id)
    assert resolved.verified is True
    assert (resolved.payload or {})["decision"]["operator"] == "oncall"
    assert [(n.event, n.delivered) for n in result.notifications] == [
        ("escalation.opened", True),
        ("escalation.resolved", True),
    ]
    events = [e.event_type async for e in handle.fetch_history_events()]
    assert events.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) == 1
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events


async def test_webhook_500s_are_retried_and_a_4xx_is_given_up(
    harness: Harness, sim_admin: SimAdmin, receiver: WebhookReceiver
) -> None:
    """Opened: 500, 500, then 200 (Temporal's retries with backoff). Resolved: 400, not
    retried, recorded as failed; the run itself completes either way."""
    await _all_down(sim_admin)
    receiver.fail_next([500, 500])
    handle = await _start(harness)
    await _until_pending(handle)
    await receiver.wait_for("escalation.opened", handle.id, timeout_s=20)
    receiver.fail_next([400])
    await handle.execute_update(AgentPipelineWorkflow.resolve, ACCEPT)
    result: PipelineResult = await asyncio.wait_for(handle.result(), 60)

    seen = [(r.event, r.status) for r in receiver.received]
    assert seen == [
        ("escalation.opened", 500),
        ("escalation.opened", 500),
        ("escalation.opened", 200),
        ("escalation.resolved", 400),
    ]
    opened, resolved = result.notifications
    assert opened.delivered and opened.attempt == 3
    assert not resolved.delivered and "webhook_rejected" in resolved.detail
    assert result.escalation is EscalationState.RESOLVED and result.answer


async def test_without_a_url_the_notification_is_a_no_op(
    harness: Harness, sim_admin: SimAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No FAILOVER_ESCALATION_WEBHOOK_URL on the worker: nothing is sent, the run says so."""
    monkeypatch.delenv(WEBHOOK_URL_ENV, raising=False)
    await _all_down(sim_admin)
    handle = await _start(harness)
    await _until_pending(handle)
    await handle.execute_update(AgentPipelineWorkflow.resolve, ACCEPT)
    result: PipelineResult = await asyncio.wait_for(handle.result(), 60)
    assert [(n.event, n.skipped, n.delivered) for n in result.notifications] == [
        ("escalation.opened", True, False),
        ("escalation.resolved", True, False),
    ]
    assert WEBHOOK_URL_ENV in result.notifications[0].detail
