"""Qualification on the dev server: the golden set separates simulator endpoints by their
accuracy, measures schema compliance and latency, and resumes without re-scoring."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from agent_failover.cli.qualify import QualifyArgs, build_input
from agent_failover.datasets import DATASETS_DIR
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.qualification import (
    QualificationLock,
    RoleQualification,
    RouteQualification,
)
from agent_failover.testing.harness import Harness, make_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.faults import Fault, FaultKind
from agent_failover.testing.workflows import CallInput, ResilientCallWorkflow
from agent_failover.workflows.qualify import (
    INVALID_QUALIFY_INPUT,
    QualifyInput,
    QualifyProgress,
    QualifyResult,
    QualifyWorkflow,
)

pytestmark = pytest.mark.devserver

ACCURACY = {
    "anthropic-us-east": 1.0,
    "bedrock-us-west-2": 1.0,
    "vertex-europe-west1": 1.0,
    "anthropic-eu-west": 1.0,
    "openai-us": 0.95,
    "cheap-mini": 0.3,
    "gemini-flash": 0.6,
}


def _input(policy: PolicyConfig, role: str, **kw) -> QualifyInput:
    args = QualifyArgs(role, None, 0.85, None, None, None, 4, False)
    inp = build_input(args, policy, DATASETS_DIR / f"{role}.jsonl")
    return inp.model_copy(update=kw)


async def _set_accuracy(admin: SimAdmin) -> None:
    for route, acc in ACCURACY.items():
        await admin.set_accuracy(route, acc)


async def _start(h: Harness, inp: QualifyInput) -> WorkflowHandle:
    return await h.client.start_workflow(
        QualifyWorkflow.run,
        inp,
        id=f"qualify-test-{uuid.uuid4().hex[:8]}",
        task_queue=h.task_queue,
        result_type=QualifyResult,
    )


async def test_qualification_separates_endpoints_by_accuracy(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """Accuracy 1.0 routes score 1.0 and qualify; the 0.3 and 0.6 routes fall below 0.85
    and are UNQUALIFIED; every route has a median and p95 latency; each (item, route)
    pair is called exactly once."""
    await _set_accuracy(sim_admin)
    h, workers = await make_harness(dev_env.client, policy)
    inp = _input(policy, "analyst")
    async with running(workers):
        out = await (await _start(h, inp)).result()
    v = {r: rep.verdict for r, rep in out.routes.items()}
    assert {r for r, x in v.items() if x.quality == 1.0} >= {
        r for r, a in ACCURACY.items() if a == 1.0
    }
    assert not v["cheap-mini"].qualified and not v["gemini-flash"].qualified
    assert v["cheap-mini"].quality < v["gemini-flash"].quality < v["anthropic-us-east"].quality
    assert all(x.latency_p50_ms and x.latency_p95_ms >= x.latency_p50_ms for x in v.values())
    assert all(x.items == len(inp.items) and x.errors == 0 for x in v.values())
    calls = Counter(a.endpoint for a in await sim_admin.attempts())
    assert calls == {r: len(inp.items) for r in inp.routes}
    assert out.routes["cheap-mini"].failed and out.routes["cheap-mini"].failed[0].detail


async def test_schema_compliance_and_errors_are_measured(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """Critic (JSON schema role): a route that violates the schema has 0 compliance and
    quality; a route that always fails is measured with errors (score 0), not retried
    forever; the others comply fully."""
    await _set_accuracy(sim_admin)
    await sim_admin.set_faults("gemini-flash", [Fault(kind=FaultKind.SCHEMA_VIOLATION)])
    await sim_admin.set_faults("openai-us", [Fault(kind=FaultKind.SERVER_ERROR)])
    h, workers = await make_harness(dev_env.client, policy)
    inp = _input(policy, "critic", items=_input(policy, "critic").items[:6])
    async with running(workers):
        out = await (await _start(h, inp)).result()
    v = {r: rep.verdict for r, rep in out.routes.items()}
    assert v["gemini-flash"].schema_compliance == 0.0 and v["gemini-flash"].quality == 0.0
    assert v["openai-us"].errors == 6 and v["openai-us"].quality == 0.0
    assert v["openai-us"].latency_p50_ms is None
    assert v["anthropic-us-east"].schema_compliance == 1.0
    assert v["anthropic-us-east"].qualified


async def _progress(handle: WorkflowHandle) -> QualifyProgress:
    return await handle.query(QualifyWorkflow.progress, result_type=QualifyProgress)


async def test_worker_restart_mid_run_does_not_rescore(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """The worker is stopped mid-run and a new one started on the same queue: the run
    completes, and only the items in flight at the stop are sent again (the finished ones
    are in the workflow's state). Continue-as-new every 10 items keeps history small."""
    await _set_accuracy(sim_admin)
    # Slow enough that the stop lands mid-run.
    for route in ACCURACY:
        await sim_admin.set_faults(route, [Fault(kind=FaultKind.LATENCY, seconds=0.05)])
    h, workers = await make_harness(dev_env.client, policy)
    inp = _input(policy, "researcher", concurrency=2, continue_as_new_every=10)
    total = len(inp.items) * len(inp.routes)
    async with running(workers):
        handle = await _start(h, inp)
        deadline = time.monotonic() + 30
        while (done := (await _progress(handle)).done) < total // 3:
            assert time.monotonic() < deadline, "qualification made no progress"
            await asyncio.sleep(0.05)
    assert done < total, "the run finished before the worker was stopped"
    before = len(await sim_admin.attempts())
    _, workers2 = await make_harness(dev_env.client, policy, task_queue=h.task_queue)
    async with running(workers2):
        out = await handle.result()
    assert out.runs > 1
    assert all(rep.verdict.items == len(inp.items) for rep in out.routes.values())
    sent = len(await sim_admin.attempts())
    # Only the rest is sent after the restart (and at most the items that were in flight
    # at the stop, concurrency 2, a second time): nothing finished is re-scored.
    assert before < total
    assert total <= sent <= total + inp.concurrency


async def test_unqualified_primary_is_skipped_with_its_reason(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """With the lock saying the primary is below min_quality, a call is answered by a
    standby and its failover history records the skip with the measured quality; the
    primary receives no request."""
    verdict = RouteQualification(quality=0.4, pass_rate=0.4, items=20, errors=0, qualified=False)
    entry = RoleQualification(
        golden_set="plain.jsonl",
        golden_hash="0123456789abcdef",
        scorer="normalized",
        min_quality=0.85,
        qualified_at="2026-11-30T12:00:00+00:00",
        routes={"anthropic-us-east": verdict},
    )
    qualified = policy.with_qualification(QualificationLock(roles={"plain": entry}))
    h, workers = await make_harness(dev_env.client, qualified)
    async with running(workers):
        out: AgentOutput = await h.client.execute_workflow(
            ResilientCallWorkflow.run,
            CallInput(
                role="plain", request=ChatRequest(messages=[Message(role="user", content="hi")])
            ),
            id=f"call-{uuid.uuid4().hex[:8]}",
            task_queue=h.task_queue,
            result_type=AgentOutput,
        )
    assert out.tier == 1
    [skip] = [a for a in out.attempts if a.outcome == "skipped"]
    assert skip.route == "anthropic-us-east" and "unqualified: quality 0.40" in skip.note
    assert "anthropic-us-east" not in {a.endpoint for a in await sim_admin.attempts()}


async def test_bad_input_ends_the_run_with_the_reason(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """Duplicate item ids or routes fail the run at once, saying what to fix; nothing is sent."""
    inp = _input(policy, "analyst")
    bad = inp.model_copy(
        update={"items": [inp.items[0], inp.items[0]], "routes": ["openai-us", "openai-us"]}
    )
    h, workers = await make_harness(dev_env.client, policy)
    async with running(workers):
        with pytest.raises(WorkflowFailureError) as info:
            await (await _start(h, bad)).result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == INVALID_QUALIFY_INPUT
    assert "listed twice" in cause.message and "ids must be unique" in cause.message
    assert await sim_admin.attempts() == []
