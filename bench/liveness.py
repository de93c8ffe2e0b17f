"""Benchmark: how each liveness scenario (a run that could hang) ends, and how long it takes.

Four runs against the simulator, each with a budget after which it is terminated and
reported as still running:

* a pipeline with every endpoint down and nobody answering its escalation (time-skipping
  server, default 900 s timeout): workflow seconds until it ended, and how;
* a pipeline started with a bare string (dev server, production-configured worker);
* a pipeline whose primary answers 1 MiB to every call;
* one call whose primary streams without end (~400 kB/s).

Prints one JSON document. Run it on two checkouts (before / after a change) and compare
side by side; the simulator's ``oversized_output`` fault must exist in both. Usage::

    .venv/bin/python bench/liveness.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.plugin import FailoverPlugin
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.factory import Stores
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.testing.harness import make_harness, running
from agent_failover.testing.roles import with_test_roles
from agent_failover.testing.servers import start_dev_server, start_time_skipping
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.testing.workflows import ResilientCallWorkflow
from agent_failover.workflows.models import PipelineInput, PipelineOptions

ALL = ["anthropic-us-east", "anthropic-eu-west", "openai-us", "cheap-mini", "gemini-flash"]
PRIMARY = ALL[0]


async def ended(handle: WorkflowHandle, budget_s: float) -> dict[str, Any]:
    """How the run ended (or that it had not, after ``budget_s``) and how long it took."""
    t0 = time.monotonic()
    result: Any = None
    try:
        result = await asyncio.wait_for(asyncio.shield(handle.result()), budget_s)
        status = "completed"
    except TimeoutError:
        await handle.terminate("bench: budget spent")
        return {"status": f"still running after {budget_s:g} s"}
    except Exception as exc:  # the run failed: report its failure type
        cause = getattr(exc, "cause", None)
        status = f"failed: {getattr(cause, 'type', type(cause).__name__)}"
    desc = await handle.describe()
    assert desc.close_time is not None
    out: dict[str, Any] = {
        "status": status,
        "wall_s": round(time.monotonic() - t0, 2),
        "workflow_s": round((desc.close_time - desc.start_time).total_seconds(), 1),
    }
    if isinstance(result, dict):
        if "critic_verdict" in result:
            out["critic_verdict"] = result["critic_verdict"]
        if "attempts" in result:
            out["attempts"] = [
                [a["route"], a["outcome"], round((a.get("latency_ms") or 0) / 1000, 2)]
                for a in result["attempts"]
            ]
    return out


async def unanswered_escalation(admin: SimAdmin, policy: Any) -> dict[str, Any]:
    env = await start_time_skipping()
    try:
        h, workers = await make_harness(env.client, policy)
        async with running(workers):
            for ep in ALL:
                await admin.set_faults(ep, [{"kind": "auth_error"}])
            handle = await env.client.start_workflow(
                "AgentPipelineWorkflow",
                {"task": "everything is down"},
                id=f"bench-{uuid.uuid4().hex[:6]}",
                task_queue=h.task_queue,
            )
            return await ended(handle, 120)
    finally:
        await admin.reset()
        await env.shutdown()


async def on_dev_server(client: Client, admin: SimAdmin, policy: Any) -> dict[str, Any]:
    tq = f"bench-{uuid.uuid4().hex[:6]}"
    stores = Stores(MemoryHealthStore(), MemoryResponseCache(), "bench")
    plugin = FailoverPlugin(policy, stores=stores, start_monitor=False, include_pipeline=True)
    worker = Worker(client, task_queue=tq, workflows=[ResilientCallWorkflow], plugins=[plugin])
    out: dict[str, Any] = {}

    async def start(workflow: str, *args: Any) -> WorkflowHandle:
        wid = f"bench-{uuid.uuid4().hex[:6]}"
        return await client.start_workflow(workflow, args=list(args), id=wid, task_queue=tq)

    async with running([worker]):
        out["pipeline started with a bare string"] = await ended(
            await start("AgentPipelineWorkflow", "hello"), 30
        )
        await admin.set_faults(
            PRIMARY,
            [
                {"kind": "oversized_output", "size_bytes": 1 << 20},
                {"kind": "tokens_per_sec", "rate": 10_000_000},
            ],
        )
        inp = PipelineInput(task="runaway", options=PipelineOptions(revision_rounds=0))
        out["pipeline, primary answers 1 MiB"] = await ended(
            await start("AgentPipelineWorkflow", inp.model_dump(mode="json")), 120
        )
        await admin.set_faults(
            PRIMARY,
            [
                {"kind": "oversized_output", "size_bytes": 64 << 20},
                {"kind": "tokens_per_sec", "rate": 100_000},
            ],
        )
        call = {"role": "plain", "request": {"messages": [{"role": "user", "content": "go"}]}}
        out["one call, primary streams without end"] = await ended(
            await start("ResilientCallWorkflow", call), 120
        )
    return out


async def main() -> None:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    admin = SimAdmin(sim.url)
    policy = with_test_roles(load_policy(DEFAULT_POLICY_PATH))
    try:
        report = {
            "everything down, nobody answers the escalation": await unanswered_escalation(
                admin, policy
            )
        }
        dev = await start_dev_server(ui=False)
        try:
            report.update(await on_dev_server(dev.client, admin, policy))
        finally:
            await dev.shutdown()
    finally:
        await admin.aclose()
        await sim.stop()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
