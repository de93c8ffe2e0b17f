"""Benchmark: a workflow making several calls of one role, with and without role-context reuse.

One run calls ``resilient_complete`` ``--calls`` times (role ``plain``) one after the
other, as an agent loop's tool rounds do, against the simulator's healthy primary (a child
process) on one dev server, with in-memory stores. Arms, interleaved run by run:

* ``default``: no call options: the role's ``context_reuse_s`` (1 s) applies where the
  code has it (run this arm alone on a tree from before reuse for the "before" figure);
* ``off``: ``CallOptions(context_reuse_s=0)``: every call reads its own role context (the
  behaviour before reuse, on today's code).

Per arm, per call: the history bytes (sum of the events' protobuf sizes) and events, the
``role_context`` local activities, the p50 wall time, and the CPU seconds of this
process (worker and client; the simulator and the dev server are other processes).
Prints JSON. Usage::

    .venv/bin/python bench/context_reuse.py --runs 30 --calls 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.models import ChatRequest, Message
    from agent_failover.resilience.options import CallOptions
    from agent_failover.workflows.resilient import resilient_complete

ROLE = "plain"


@workflow.defn(name="BenchRepeatedCalls")
class BenchRepeatedCalls:
    """``calls`` calls of one role, one after the other; the answers' lengths."""

    @workflow.run
    async def run(self, calls: int, reuse_off: bool) -> list[int]:
        options = CallOptions(context_reuse_s=0) if reuse_off else None
        out = []
        for i in range(calls):
            request = ChatRequest(messages=[Message(role="user", content=f"round {i}")])
            answer = await resilient_complete(ROLE, request, options=options)
            out.append(len(answer.content))
        return out


async def _history(client: Any, wf_id: str) -> dict[str, int]:
    hist = await client.get_workflow_handle(wf_id).fetch_history()
    markers = sum(
        1
        for e in hist.events
        if e.HasField("marker_recorded_event_attributes")
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    )
    return {
        "bytes": sum(e.ByteSize() for e in hist.events),
        "events": len(hist.events),
        "local_activities": markers,
    }


async def _one(h: Any, calls: int, arm: str) -> tuple[float, float, str]:
    wid = f"bench-reuse-{arm}-{uuid.uuid4().hex[:8]}"
    cpu0, t0 = time.process_time(), time.perf_counter()
    await h.client.execute_workflow(
        BenchRepeatedCalls.run,
        args=[calls, arm == "off"],
        id=wid,
        task_queue=h.task_queue,
    )
    return time.perf_counter() - t0, time.process_time() - cpu0, wid


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the simulator and a dev server, run the arms interleaved, return the document."""
    from agent_failover.config import DEFAULT_POLICY_PATH
    from agent_failover.config.loader import load_policy
    from agent_failover.testing.harness import make_harness, running
    from agent_failover.testing.roles import with_test_roles
    from agent_failover.testing.servers import start_dev_server
    from bench.overhead import SimProcess
    from bench.run_facts import loadavg

    sim = await SimProcess().ready()
    os.environ["SIM_URL"] = sim.url
    env = await start_dev_server(ui=False)
    policy = with_test_roles(load_policy(DEFAULT_POLICY_PATH))
    h, workers = await make_harness(env.client, policy, workflows=[BenchRepeatedCalls])
    arms: dict[str, dict[str, list[Any]]] = {
        a: {"wall": [], "cpu": [], "ids": []} for a in args.arms
    }
    load_before = loadavg()
    try:
        async with running(workers):
            for arm in args.arms:  # warm-up: imports, connections, first policy publish
                await _one(h, args.calls, arm)
            for _ in range(args.runs):
                for arm in args.arms:
                    wall, cpu, wid = await _one(h, args.calls, arm)
                    for k, v in (("wall", wall), ("cpu", cpu), ("ids", wid)):
                        arms[arm][k].append(v)
            res = {a: await _summary(h.client, m, args.calls) for a, m in arms.items()}
    finally:
        await env.shutdown()
        await sim.stop()
    return {
        "setup": {
            "calls_per_run": args.calls,
            "runs_per_arm": args.runs,
            "role": ROLE,
            "load_average_before": load_before,
            "load_average_after": loadavg(),
        },
        "arms": res,
    }


async def _summary(client: Any, m: dict[str, list[Any]], calls: int) -> dict[str, Any]:
    hists = [await _history(client, wid) for wid in m["ids"]]
    n = len(hists) * calls

    def per_call(key: str) -> float:
        return round(sum(x[key] for x in hists) / n, 2)

    return {
        "history_bytes_per_call": per_call("bytes"),
        "history_events_per_call": per_call("events"),
        "local_activities_per_call": per_call("local_activities"),
        "cpu_ms_per_call": round(1000 * sum(m["cpu"]) / n, 2),
        "wall_ms_per_call_p50": round(1000 * _p50(m["wall"]) / calls, 1),
    }


def _p50(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2]


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print (and optionally write) the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="runs per arm")
    ap.add_argument("--calls", type=int, default=5, help="calls of the role per run")
    ap.add_argument(
        "--arms",
        type=lambda v: v.split(","),
        default=["default", "off"],
        help="comma-separated: default, off (a tree from before reuse: default only)",
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    text = json.dumps(asyncio.run(run(args)), indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    # The workflow must live in an importable module (the sandbox re-imports it by name),
    # not in __main__: run this file's own module.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import context_reuse

    raise SystemExit(context_reuse.main())
