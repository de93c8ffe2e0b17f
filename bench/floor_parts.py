"""Benchmark: what the gap between a resilient call and the bare floor is made of, by parts.

``bench/overhead.py`` compares the failover arm with the bare workflow (one activity, one
JSON POST). A resilient call does two things that floor does not, and this benchmark
adds them to the bare workflow one at a time, all arms interleaved in one run on the
same stack (simulator primary in its own process, +50 ms to first token, one dev server):

* ``bare``: the floor (:class:`agent_failover.testing.bare.BareCallWorkflow`);
* ``bare-context``: the same, after one local activity whose result is as many bytes of
  JSON as the failover arm's role context in this run (read from its history): what a
  read recorded in history before the call costs, with no work in its body (the
  resilient call's shape before its context moved into its first attempt's activity);
* ``bare-stream``: the activity reads the reply as server-sent events (``aiter_lines``,
  as a user's own streaming activity would), not one JSON body;
* ``bare-context-stream``: both;
* ``failover``: ``resilient_complete`` (role ``plain``) as in ``bench/overhead.py``.

Prints JSON: per arm p50/p99, throughput and worker CPU per call at each concurrency
(``--concurrency``), with the CPU per call the simulator and the dev server spent meanwhile
(on two cores they compete with the worker: a streamed reply costs the simulator more
than a JSON one, and that shows in a streaming arm's throughput, not in its worker CPU),
history bytes; ratios to ``bare``; and ``gap_ms``, the failover arm's
CPU per call minus the bare arm's split into the context's share, streaming's share and
the rest (what agent-failover's own code costs beyond those two). ``--png`` draws the CPU
per call of each arm. Usage::

    .venv/bin/python bench/floor_parts.py --rounds 3 --concurrency 16,64 --png out.png
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import (  # beside this file
    _Arms,
    _measure,
    _ratios,
    bench_stack,
    emit,
    run_setup,
    save_figure,
)
from run_facts import ChildCPU, loadavg  # beside this file

from agent_failover.testing.bare import BareCallWorkflow

ARMS = ["bare", "bare-context", "bare-stream", "bare-context-stream", "failover"]
#: The local activity's result size when the failover arm's history has none to read.
DEFAULT_CONTEXT_BYTES = 200


async def context_bytes(arms: _Arms) -> int:
    """The size of the role context in one failover call's history: the ``context`` of its
    ``first_call`` result (or, in a run that read it with the ``role_context`` local
    activity, that marker's result)."""
    await arms.failover()
    wf_id = arms.ids["failover"][-1]
    hist = await arms.client.get_workflow_handle(wf_id).fetch_history()
    for e in hist.events:
        if e.HasField("activity_task_completed_event_attributes"):
            for p in e.activity_task_completed_event_attributes.result.payloads:
                data = json.loads(p.data)
                if isinstance(data, dict) and "context" in data:
                    return len(json.dumps(data["context"], separators=(",", ":")))
        if e.HasField("marker_recorded_event_attributes"):
            result = e.marker_recorded_event_attributes.details.get("result")
            if result is not None and result.payloads:
                return max(len(p.data) for p in result.payloads)
    return DEFAULT_CONTEXT_BYTES


class PartsArms(_Arms):
    """The bare workflow with the context read, the stream, or both."""

    context_size = DEFAULT_CONTEXT_BYTES

    async def _bare_with(self, arm: str, *, context: bool, stream: bool) -> None:
        inp = self._input().model_copy(
            update={"context_bytes": self.context_size if context else None, "stream": stream}
        )
        await self.client.execute_workflow(
            BareCallWorkflow.run, inp, id=self._id(arm), task_queue=self.bare_tq, result_type=str
        )

    async def bare_context(self) -> None:
        await self._bare_with("bare-context", context=True, stream=False)

    async def bare_stream(self) -> None:
        await self._bare_with("bare-stream", context=False, stream=True)

    async def bare_context_stream(self) -> None:
        await self._bare_with("bare-context-stream", context=True, stream=True)


def gap(res: dict[str, Any], width: int) -> dict[str, float]:
    """The failover arm's extra CPU per call at ``width`` in flight, by part (ms)."""
    key = f"cpu_ms_per_call_c{width}"
    bare, fo = res["bare"][key], res["failover"][key]
    ctx = res["bare-context"][key] - bare
    stream = res["bare-stream"][key] - bare
    return {
        "failover_minus_bare": round(fo - bare, 2),
        "context_read": round(ctx, 2),
        "streaming": round(stream, 2),
        "both_together": round(res["bare-context-stream"][key] - bare, 2),
        "rest_agent_failover_own": round(fo - bare - ctx - stream, 2),
    }


#: Command-line markers of the children whose CPU is recorded beside the worker's.
CHILDREN = {"simulator": "run_simulator_blocking", "server": "start-dev"}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the stack, size the context from a failover call, run the arms interleaved."""
    stack = bench_stack(args.ttft_ms, queued=False, with_litellm=False, arms_class=PartsArms)
    async with stack as (arms, _):
        size = await context_bytes(arms)
        PartsArms.context_size = size
        load_before = loadavg()
        res = await _measure(arms, ARMS, args, ChildCPU(CHILDREN))
    return {
        "setup": run_setup(args, load_before) | {"context_bytes": size},
        "arms": res,
        "ratios": _ratios(res),
        "gap_ms": {f"c{w}": gap(res, w) for w in args.concurrency},
    }


def draw(doc: dict[str, Any], path: str) -> None:
    """Worker CPU per call of each arm at each concurrency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms, widths = doc["arms"], doc["setup"]["concurrency"]
    fig, ax = plt.subplots(figsize=(9, 4))
    step = 0.8 / len(widths)
    for i, width in enumerate(widths):
        xs = [x - 0.4 + step * (i + 0.5) for x in range(len(arms))]
        ax.bar(xs, [a[f"cpu_ms_per_call_c{width}"] for a in arms.values()], step, label=f"c{width}")
    ax.set_xticks(range(len(arms)), list(arms), rotation=15)
    ax.set_ylabel("process CPU ms per call")
    ax.legend()
    save_figure(fig, "What the gap to the bare floor is made of (one run)", path)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print (and optionally write) JSON, optionally draw."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10, help="sequential calls per arm per round")
    ap.add_argument("--concurrent", type=int, default=64, help="calls per arm per round")
    ap.add_argument(
        "--concurrency",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[16],
        help="calls in flight for the concurrent part, comma-separated (e.g. 16,64)",
    )
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--history-sample", type=int, default=10)
    ap.add_argument("--out", default=None)
    ap.add_argument("--png", default=None)
    args = ap.parse_args(argv)
    emit(asyncio.run(run(args)), args.out, args.png, draw)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
