"""Benchmark: what the caller waits, and what each route sees, for every fault — and hedging.

Part 1 (fault matrix): for each fault injected on the primary route, one resilient call
through a real Temporal worker (embedded dev server) against the simulator; records how
long the caller waited, which route answered, and how many attempts the simulator saw
per route. The baseline row is the healthy call, so every row also reports its wait as a
ratio to the healthy wait.

Part 2 (hedging): the same stateless role with and without hedging (delay 1 s) while the
primary's latency is lognormal (median 400 ms, sigma 1.0: a heavy tail); p50/p95/p99 of
caller latency side by side, with the ratio and the extra load hedging costs. The hedge
delay is a Temporal timer; the dev server fires timers with roughly one-second
granularity, which is why the benchmark uses a 1 s delay. Prints one JSON document;
``--png`` draws both charts. Usage::

    .venv/bin/python bench/failover_conduct.py --calls 40 --png bench/out/failover.png
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.percentile import percentile
from agent_failover.testing.harness import make_harness, running
from agent_failover.testing.roles import with_test_roles
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.testing.workflows import CallInput, ResilientCallWorkflow

PRIMARY = "anthropic-us-east"
FAULTS: list[tuple[str, dict[str, Any]]] = [
    ("healthy", {}),
    ("overloaded 529", {"kind": "overloaded"}),
    ("429 + Retry-After", {"kind": "rate_limit", "retry_after": 30}),
    ("server error 500", {"kind": "server_error"}),
    ("connection reset", {"kind": "connection_reset"}),
    ("no response (hang)", {"kind": "hang"}),
    ("slow first token", {"kind": "slow_first_token", "seconds": 30}),
    ("stream cut", {"kind": "stream_cut", "after_tokens": 5}),
    ("stream stall", {"kind": "stream_stall", "after_tokens": 5, "seconds": 30}),
    ("malformed chunk (one)", {"kind": "malformed_chunk", "after_tokens": 3}),
    ("error event in 200", {"kind": "stream_error_event", "after_tokens": 3}),
    ("no [DONE]", {"kind": "no_done"}),
    ("context length", {"kind": "context_length"}),
    ("content filter", {"kind": "content_filter"}),
    ("empty output", {"kind": "empty_output"}),
    ("auth 401", {"kind": "auth_error"}),
]


def _req(i: int) -> ChatRequest:
    return ChatRequest(
        messages=[Message(role="user", content=f"benchmark call {i} {uuid.uuid4().hex[:6]}")],
        max_tokens=120,
    )


async def _call(h, role: str, i: int) -> tuple[AgentOutput, float]:
    t0 = time.perf_counter()
    out = await h.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role=role, request=_req(i)),
        id=f"bench-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=AgentOutput,
    )
    return out, time.perf_counter() - t0


async def main(calls: int, png: str | None) -> dict[str, Any]:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_dev_server(ui=False)
    admin = SimAdmin(sim.url)
    policy = with_test_roles(load_policy(DEFAULT_POLICY_PATH), hedge_delay_ms=1000.0)
    report: dict[str, Any] = {"faults": [], "hedging": {}}
    try:
        # Fault matrix: a fresh worker (and fresh health state) per fault, so one fault's
        # open breaker does not change the next row.
        for name, fault in FAULTS:
            h, workers = await make_harness(env.client, policy)
            async with running(workers):
                await admin.reset()
                if fault:
                    await admin.set_faults(PRIMARY, [fault])
                out, waited = await _call(h, "plain", 0)
                seen = Counter(a["endpoint"] for a in await admin.attempts())
            await h.activities.deps.http.aclose()
            report["faults"].append(
                {
                    "fault": name,
                    "caller_wait_s": round(waited, 3),
                    "answered_by": out.route or out.capability.value,
                    "tier": out.tier,
                    "attempts_seen": dict(seen),
                    "reason_codes": [c.value for c in out.reason_codes],
                }
            )
        healthy = report["faults"][0]["caller_wait_s"]
        for row in report["faults"]:
            row["wait_ratio_vs_healthy"] = round(row["caller_wait_s"] / healthy, 2)
        # Hedging: same traffic, same heavy-tailed primary, with and without hedges.
        for role in ("plain", "hedged"):
            h, workers = await make_harness(env.client, policy)
            async with running(workers):
                await admin.reset()
                await admin.set_faults(
                    PRIMARY, [{"kind": "lognormal_latency", "median_s": 0.4, "sigma": 1.0}]
                )
                waits = []
                for i in range(calls):
                    _, w = await _call(h, role, i)
                    waits.append(w * 1000)
                seen = Counter(a["endpoint"] for a in await admin.attempts())
            await h.activities.deps.http.aclose()
            report["hedging"][role] = {
                "calls": calls,
                "p50_ms": round(percentile(waits, 50) or 0, 1),
                "p95_ms": round(percentile(waits, 95) or 0, 1),
                "p99_ms": round(percentile(waits, 99) or 0, 1),
                "attempts_seen": dict(seen),
            }
        p, hd = report["hedging"]["plain"], report["hedging"]["hedged"]
        report["hedging"]["ratio_hedged_vs_plain"] = {
            k: round(hd[k] / p[k], 3) if p[k] else None for k in ("p50_ms", "p95_ms", "p99_ms")
        }
        report["hedging"]["extra_attempts_ratio"] = round(
            sum(hd["attempts_seen"].values()) / max(1, sum(p["attempts_seen"].values())), 3
        )
    finally:
        await admin.aclose()
        await env.shutdown()
        await sim.stop()
    if png:
        _draw(report, png)
    return report


def _draw(report: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(14, 6), gridspec_kw={"width_ratios": [2, 1]})
    rows = report["faults"]
    a1.barh([r["fault"] for r in rows], [r["caller_wait_s"] for r in rows], color="#4c72b0")
    for i, r in enumerate(rows):
        a1.text(r["caller_wait_s"], i, f" {r['answered_by']}", va="center", fontsize=8)
    a1.set_xlabel("caller wait (s), one resilient call; label = route that answered")
    a1.invert_yaxis()
    a1.set_title("Fault on the primary → caller wait")
    hed = report["hedging"]
    xs = ["p50_ms", "p95_ms", "p99_ms"]
    import numpy as np

    x = np.arange(len(xs))
    a2.bar(x - 0.2, [hed["plain"][k] for k in xs], 0.4, label="no hedging")
    a2.bar(x + 0.2, [hed["hedged"][k] for k in xs], 0.4, label="hedged (1 s)")
    a2.set_xticks(x, ["p50", "p95", "p99"])
    a2.set_ylabel("caller latency (ms)")
    a2.set_title("Heavy-tailed primary: hedging")
    a2.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=40, help="calls per hedging arm")
    ap.add_argument("--png", default=None, help="write a chart here")
    args = ap.parse_args()
    # Temporal's core and the dev server log on fd 1; keep stdout for the JSON alone.
    sys.stdout.flush()
    json_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    result = asyncio.run(main(args.calls, args.png))
    json_out.write(json.dumps(result, indent=2) + "\n")
    json_out.flush()
