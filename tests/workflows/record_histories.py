"""Record the workflow histories that the replay test checks (run by hand after a change).

    .venv/bin/python -m tests.workflows.record_histories [NAME ...]

Runs a healthy pipeline, a failover pipeline, a hedged resilient call and a call whose
context is summarized before triage (issue 14) on a fresh dev server against the
simulator, and writes each history to ``tests/histories/``. With NAMEs (e.g.
``call_summarized``) only those are recorded: a new path gets a new file while the
committed ones stay as recorded by older code. Commit
the files: replaying them in CI catches any workflow change that would break running
workflows (non-determinism).
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.providers.models import ChatRequest, Message
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.testing.roles import with_quality_roles
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.workflows.conftest import Harness, make_harness, running
from tests.workflows.helpers import CallInput, ResilientCallWorkflow, with_test_roles

OUT = Path(__file__).resolve().parents[1] / "histories"


async def main(only: set[str]) -> None:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_dev_server(ui=False)
    admin = SimAdmin(sim.url)
    policy = with_quality_roles(with_test_roles(load_policy(DEFAULT_POLICY_PATH)))
    h, workers = await make_harness(env.client, policy)
    OUT.mkdir(exist_ok=True)
    try:
        async with running(workers):
            runs = []
            if not only or only - {"call_summarized"}:
                runs += await _classic_runs(h, admin)
            if not only or "call_summarized" in only:
                runs.append(("call_summarized", await _summarized_run(h, admin)))
            for name, wid in runs:
                if only and name not in only:
                    continue
                history = await h.client.get_workflow_handle(wid).fetch_history()
                (OUT / f"{name}.json").write_text(history.to_json())
                print(f"wrote {OUT / (name + '.json')}")
    finally:
        await admin.aclose()
        await env.shutdown()
        await sim.stop()


async def _summarized_run(h: Harness, admin: SimAdmin) -> str:
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
    return wid


async def _classic_runs(h: Harness, admin: SimAdmin) -> list[tuple[str, str]]:
    """The healthy and failover pipelines and the hedged call (the first histories)."""
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
    return runs


if __name__ == "__main__":
    asyncio.run(main(set(sys.argv[1:])))
