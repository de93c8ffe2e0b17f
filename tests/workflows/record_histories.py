"""Record the workflow histories that the replay test checks (run by hand after a change).

    .venv/bin/python -m tests.workflows.record_histories [NAME ...]

Runs a healthy pipeline, a failover pipeline, a hedged resilient call and an escalated
pipeline (paused, resolved through the ``resolve`` update) on a fresh dev server against
the simulator, and writes each history to ``tests/histories/``. Commit the files:
replaying them in CI catches any workflow change that would break running workflows
(non-determinism). An existing file is never overwritten (a new code path gets a new
name); names on the command line record only those runs.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

from agent_failover.activities.notify import WEBHOOK_SECRET_ENV, WEBHOOK_URL_ENV
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.providers.models import ChatRequest, Message
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.testing.webhook_receiver import WebhookReceiver
from agent_failover.workflows.models import (
    EscalationAction,
    EscalationDecision,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.workflows.conftest import Harness, make_harness, running
from tests.workflows.helpers import (
    CallInput,
    ResilientCallWorkflow,
    with_test_roles,
)

OUT = Path(__file__).resolve().parents[1] / "histories"
#: Every endpoint of the shipped policy (all down: the planner escalates).
ALL_ENDPOINTS = (
    "anthropic-us-east", "anthropic-eu-west", "bedrock-us-west-2", "vertex-europe-west1",
    "openai-us", "cheap-mini", "gemini-flash",
)  # fmt: skip
#: The escalated run recorded before on-call notifications existed (replays unpatched).
ESCALATION_NAME = "pipeline_escalation"
#: The escalated run with its opened/resolved notifications delivered to a receiver.
NOTIFIED_NAME = "pipeline_escalation_notified"


async def record_escalation(h: Harness, admin: SimAdmin) -> str:
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


async def main(only: set[str] | None = None) -> None:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_dev_server(ui=False)
    admin = SimAdmin(sim.url)
    policy = with_test_roles(load_policy(DEFAULT_POLICY_PATH))
    h, workers = await make_harness(env.client, policy)
    OUT.mkdir(exist_ok=True)
    try:
        async with running(workers):
            runs = []
            await admin.reset()
            wid = f"healthy-{uuid.uuid4().hex[:6]}"
            await h.client.execute_workflow(
                AgentPipelineWorkflow.run,
                PipelineInput(task="Compare two queue designs"),
                id=wid,
                task_queue=h.task_queue,
                result_type=PipelineResult,
            )
            runs.append(("pipeline_healthy", wid))
            await admin.set_faults("anthropic-us-east", [{"kind": "overloaded"}])
            await admin.set_faults("anthropic-eu-west", [{"kind": "stream_cut", "after_tokens": 4}])
            wid = f"failover-{uuid.uuid4().hex[:6]}"
            await h.client.execute_workflow(
                AgentPipelineWorkflow.run,
                PipelineInput(
                    task="Assess a region evacuation",
                    options=PipelineOptions(escalate_on_critical_degraded=False),
                ),
                id=wid,
                task_queue=h.task_queue,
                result_type=PipelineResult,
            )
            runs.append(("pipeline_failover", wid))
            await admin.reset()
            await admin.set_faults("anthropic-us-east", [{"kind": "latency", "seconds": 1.5}])
            wid = f"hedged-{uuid.uuid4().hex[:6]}"
            await h.client.execute_workflow(
                ResilientCallWorkflow.run,
                CallInput(
                    role="hedged",
                    request=ChatRequest(messages=[Message(role="user", content="hedge me")]),
                ),
                id=wid,
                task_queue=h.task_queue,
                result_type=AgentOutput,
            )
            runs.append(("call_hedged", wid))
            runs.append((ESCALATION_NAME, await record_escalation(h, admin)))
            async with WebhookReceiver("recorder-secret") as rx:
                os.environ[WEBHOOK_URL_ENV] = rx.url
                os.environ[WEBHOOK_SECRET_ENV] = "recorder-secret"
                try:
                    runs.append((NOTIFIED_NAME, await record_escalation(h, admin)))
                finally:
                    os.environ.pop(WEBHOOK_URL_ENV, None)
                    os.environ.pop(WEBHOOK_SECRET_ENV, None)
                assert len(rx.accepted()) == 2, rx.received
            for name, wid in runs:
                path = OUT / f"{name}.json"
                if (only and name not in only) or path.exists():
                    print(f"kept {path}" if path.exists() else f"skipped {name}")
                    continue
                history = await h.client.get_workflow_handle(wid).fetch_history()
                path.write_text(history.to_json())
                print(f"wrote {path}")
    finally:
        await admin.aclose()
        await env.shutdown()
        await sim.stop()


if __name__ == "__main__":
    asyncio.run(main(set(sys.argv[1:]) or None))
