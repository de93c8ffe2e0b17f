"""Benchmark: what summarization before truncation costs a call, against plain triage.

Runs the same oversized request (a pinned task, 16 long turns, a question; ~4.5k tokens
for a route configured with a 2k window) through the ``summarizing`` test role with
summarization on and off, on a fresh dev server against the simulator, and reports per
mode the wall-clock p50/p95 of one call, the activities it scheduled, the tokens the small
route received, and how many of the original messages (or a summary of them) it saw.
Prints one JSON document. Usage::

    .venv/bin/python bench/summarize_overhead.py --calls 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.contracts import AgentOutput, ReasonCode
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.percentile import percentile
from agent_failover.testing.harness import make_harness, running
from agent_failover.testing.roles import with_quality_roles, with_test_roles
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.testing.workflows import CallInput, ResilientCallWorkflow


def _request() -> ChatRequest:
    msgs = [Message(role="user", content="Task: plan the billing migration.", pinned=True)]
    for i in range(8):
        msgs.append(Message(role="assistant", content=f"step {i}: " + "detail " * 250))
        msgs.append(Message(role="user", content=f"noted {i}: " + "more " * 250))
    msgs.append(Message(role="user", content=f"Next step? {uuid.uuid4().hex[:8]}"))
    return ChatRequest(messages=msgs, max_tokens=120)


async def _mode(env, sim_url: str, enabled: bool, calls: int) -> dict:
    base = with_quality_roles(with_test_roles(load_policy(DEFAULT_POLICY_PATH)))
    role = base.role("summarizing")
    role = role.model_copy(
        update={"summarize": role.summarize.model_copy(update={"enabled": enabled})}
    )
    policy = base.model_copy(update={"roles": {**base.roles, "summarizing": role}})
    admin = SimAdmin(sim_url)
    h, workers = await make_harness(env.client, policy)
    times, summarized, small_tokens = [], 0, []
    try:
        async with running(workers):
            for _ in range(calls):
                await admin.clear_attempts()
                t0 = time.perf_counter()
                out: AgentOutput = await h.client.execute_workflow(
                    ResilientCallWorkflow.run,
                    CallInput(role="summarizing", request=_request()),
                    id=f"bench-sum-{uuid.uuid4().hex[:10]}",
                    task_queue=h.task_queue,
                    result_type=AgentOutput,
                )
                times.append((time.perf_counter() - t0) * 1000)
                summarized += ReasonCode.CONTEXT_SUMMARIZED in out.reason_codes
                rows = [r for r in await admin.attempts() if r.endpoint == "openai-us"]
                small_tokens += [r.input_tokens for r in rows]
    finally:
        await admin.aclose()
    return {
        "summarize_enabled": enabled,
        "calls": calls,
        "p50_ms": round(percentile(times, 50) or 0.0, 1),
        "p95_ms": round(percentile(times, 95) or 0.0, 1),
        "calls_marked_summarized": summarized,
        "small_route_input_tokens_p50": percentile([float(t) for t in small_tokens], 50),
    }


async def main(calls: int) -> None:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_dev_server(ui=False)
    try:
        off = await _mode(env, sim.url, False, calls)
        on = await _mode(env, sim.url, True, calls)
    finally:
        await env.shutdown()
        await sim.stop()
    extra = on["p50_ms"] - off["p50_ms"]
    print(json.dumps({"plain_triage": off, "summarize": on, "p50_added_ms": round(extra, 1)}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20)
    asyncio.run(main(ap.parse_args().calls))
