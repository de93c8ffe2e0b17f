"""Benchmark: a critical step whose worker is SIGKILLed mid-call (issue 22 §2.2).

Two real worker processes (``python worker.py``) serve one task queue against the
simulator (primary slowed to ~1 s per call, every route healthy) and a Redis on
127.0.0.1:6379 (namespaced per run). A pipeline starts; when the critic's ``call_model``
is running, the worker process running it is SIGKILLed. The other worker finishes the
run. Prints one JSON document per run: which tier and route answered the critic, the
critic's attempts, how long the step took from its first attempt to its answer, and
whether the pipeline escalated. Run it on two checkouts (before / after a change)::

    .venv/bin/python bench/worker_kill.py [--runs 3] [--fail-primary]

``--fail-primary``: the primary fails (529) from the kill on, so the critic's same-route
retry fails too and the call must fail over after the worker loss.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from agent_failover.testing.procs import pipeline_step_worker_pid, worker_env
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.workflows.models import (
    PipelineInput,
    PipelineOptions,
    PipelineResult,
)
from agent_failover.workflows.monitor import monitor_workflow_id
from agent_failover.workflows.pipeline import AgentPipelineWorkflow

PRIMARY = "anthropic-us-east"
ROOT = Path(__file__).resolve().parent.parent


def start_worker(address: str, sim_url: str, task_queue: str, **extra: str) -> subprocess.Popen:
    """``python worker.py`` on ``task_queue`` (its own Redis namespace), quiet."""
    env = worker_env(address=address, sim_url=sim_url, task_queue=task_queue, **extra)
    return subprocess.Popen(
        [sys.executable, "worker.py"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def one_run(
    client: Client, address: str, sim_url: str, admin: SimAdmin, fail_primary: bool
) -> dict[str, Any]:
    """One pipeline whose critic's worker is killed (and, with ``fail_primary``, whose
    primary fails from then on, so its same-route retry fails); what the critic became."""
    await admin.reset()
    await admin.set_faults(PRIMARY, [{"kind": "latency", "seconds": 1.0}])
    tq = f"kill-{uuid.uuid4().hex[:8]}"
    procs = [start_worker(address, sim_url, tq) for _ in range(2)]
    handle = await client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task=f"worker kill {uuid.uuid4().hex[:6]}",
            options=PipelineOptions(
                escalation_timeout_s=2.0, escalation_timeout_action="accept_degraded"
            ),
        ),
        id=f"kill-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
        result_type=PipelineResult,
    )
    killed: int | None = None
    try:
        deadline = time.monotonic() + 120
        while killed is None and time.monotonic() < deadline:
            pid = await pipeline_step_worker_pid(handle, "critic")
            if pid is not None and pid in [p.pid for p in procs]:
                os.kill(pid, signal.SIGKILL)
                killed = pid
                if fail_primary:
                    await admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
                break
            await asyncio.sleep(0.05)
        result: PipelineResult = await asyncio.wait_for(handle.result(), 120)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(30)
            if p.poll() is None:
                p.kill()
        with contextlib.suppress(Exception):
            await client.get_workflow_handle(monitor_workflow_id(tq)).terminate()
    timeline = await critic_timeline(handle)
    critics = [s.output for s in result.steps if s.step.startswith("critic")]
    out = max(critics, key=_span)  # the critic call the kill hit (the slowest)
    return {
        "killed_worker": killed is not None,
        "critic_tier": out.tier,
        "critic_route": out.route,
        "critic_capability": out.capability.value,
        "critic_attempts": [
            {
                "route": a.route,
                "tier": a.tier,
                "outcome": a.outcome,
                "seconds": round((a.finished_at or 0) - (a.started_at or 0), 2),
            }
            for a in out.attempts
        ],
        "critic_attempts_span_s": round(_span(out), 2),
        "escalation": result.escalation.value,
        "timeline": timeline,
    }


def _span(out: Any) -> float:
    """Seconds from a step's first attempt's start to its last attempt's end."""
    starts = [a.started_at for a in out.attempts if a.started_at]
    ends = [a.finished_at for a in out.attempts if a.finished_at]
    return max(ends) - min(starts) if starts and ends else 0.0


async def critic_timeline(handle: WorkflowHandle) -> list[str]:
    """The history from the critic's first model call on: seconds after it, event, detail
    (an activity's attempt and failure, a workflow task's queue: sticky or normal)."""
    events = (await handle.fetch_history()).events
    starts = [
        i
        for i, e in enumerate(events)
        if e.HasField("activity_task_scheduled_event_attributes")
        and "critic" in e.user_metadata.summary.data.decode(errors="replace")
    ]
    # The critic call the kill hit (a revision round may call the critic again): the one
    # whose stretch of history holds a workflow task timeout (the dead sticky queue).
    ends = [*starts[1:], len(events)]
    first = next(
        (
            a
            for a, b in zip(starts, ends, strict=True)
            if any(e.HasField("workflow_task_timed_out_event_attributes") for e in events[a:b])
        ),
        starts[0],
    )
    t0 = events[first].event_time.ToDatetime()
    out = []
    for e in events[first:]:
        name = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_").lower()
        detail = ""
        if e.HasField("activity_task_scheduled_event_attributes"):
            detail = e.user_metadata.summary.data.decode(errors="replace")
        elif e.HasField("activity_task_started_event_attributes"):
            detail = f"attempt {e.activity_task_started_event_attributes.attempt}"
        elif e.HasField("activity_task_timed_out_event_attributes"):
            detail = e.activity_task_timed_out_event_attributes.failure.message
        elif e.HasField("workflow_task_scheduled_event_attributes"):
            kind = e.workflow_task_scheduled_event_attributes.task_queue.kind
            detail = "sticky queue" if kind == 2 else "normal queue"
        elif e.HasField("workflow_task_timed_out_event_attributes"):
            detail = str(e.workflow_task_timed_out_event_attributes.timeout_type)
        t = (e.event_time.ToDatetime() - t0).total_seconds()
        out.append(f"{t:6.2f} {name} {detail}".rstrip())
        if e.HasField("workflow_task_completed_event_attributes") and len(out) > 4:
            if any("activity_task_completed" in o or "failed" in o for o in out):
                break
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--fail-primary",
        action="store_true",
        help="the primary fails (529) from the kill on: its same-route retry fails too",
    )
    args = ap.parse_args()
    env = await start_dev_server(ui=False)
    sim = await start_simulator(port=0)
    admin = SimAdmin(sim.url)
    try:
        address = env.client.service_client.config.target_host
        runs = [
            await one_run(env.client, address, sim.url, admin, args.fail_primary)
            for _ in range(args.runs)
        ]
    finally:
        await admin.aclose()
        await sim.stop()
        await env.shutdown()
    print(json.dumps({"fail_primary": args.fail_primary, "runs": runs}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
