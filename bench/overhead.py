"""Benchmark: what agent-failover costs on the healthy path, arms interleaved in one run.

Arms, all against the same simulator endpoint (the primary, ``anthropic-us-east``, with a
fixed extra time to first token, 50 ms by default) on one dev server:

* ``httpx``: a plain ``httpx`` POST from this process (no Temporal);
* ``bare``: :class:`agent_failover.testing.bare.BareCallWorkflow`, one activity doing
  that POST (the yardstick);
* ``failover``: ``resilient_complete`` through the test harness's worker (role ``plain``,
  in-memory stores; ``--redis`` for the shared store), in
  :class:`~agent_failover.testing.workflows.ResilientTextWorkflow`, which returns only the
  answer's text as the bare workflow does (so history sizes compare the call, not the
  return value: the whole ``AgentOutput`` with its attempts adds ~0.6 KB); every arm sends
  the same request: the user prompt with the role's system prompt;
* ``failover-queue``: the same with ``dispatch="queue"`` (attempts on the bulkhead's own
  task queue, the behaviour before eager dispatch), for the eager/queue comparison;
* ``litellm``: the bare workflow whose activity calls ``litellm.acompletion`` (only when
  the ``bench`` extra is installed; its local cost map, no network).

Sequential: ``--rounds`` rounds, each running ``--batch`` calls of every arm in turn
(arms interleaved so machine noise hits them alike): p50/p95/p99 latency. Concurrent:
per round, ``--concurrent`` calls with 16 in flight per arm: throughput. Per arm also
the history bytes and events per call (sum of the events' protobuf sizes, from the
server), the p50 wait of its activities between scheduled and started (from the events'
times: ~0 when Temporal hands the activity to the worker eagerly) and the CPU seconds
per call of this process (worker, client and simulator share it; the dev server is a
separate process, and so is the simulator unless ``--sim-in-process``: it stands in for a
remote provider, and its per-token streaming writes would otherwise be charged to the
streaming arm). Prints JSON with ratios to ``bare``; ``--png``
draws latency and throughput bars. Usage::

    .venv/bin/python bench/overhead.py --out bench/out/overhead.json --png bench/out/overhead.png
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

# LiteLLM must not fetch its model cost map from the internet at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.percentile import percentile
from agent_failover.testing.bare import BareActivities, BareCallInput, BareCallWorkflow
from agent_failover.testing.harness import make_harness, running
from agent_failover.testing.procs import spawn_tied, stop_process
from agent_failover.testing.roles import with_test_roles
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.config import load_sim_config
from agent_failover.testing.sim.server import start_simulator
from agent_failover.testing.workflows import CallInput, ResilientTextWorkflow

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_facts import RedisRoundTrips, loadavg  # beside this file

PRIMARY = "anthropic-us-east"
MODEL = "claude-sonnet-4-5"
CONCURRENCY = 16

try:  # the bench extra
    import litellm

    litellm.suppress_debug_info = True
except ImportError:  # pragma: no cover - depends on the extra
    litellm = None


@activity.defn(name="litellm_call")
async def litellm_call(inp: BareCallInput) -> str:
    """One LiteLLM call to the simulator's Anthropic endpoint (no retries: one attempt)."""
    assert litellm is not None
    resp = await litellm.acompletion(
        model=f"anthropic/{inp.model}",
        api_base=inp.base_url,
        api_key="bench",
        messages=[
            *([{"role": "system", "content": inp.system}] if inp.system else []),
            {"role": "user", "content": inp.prompt},
        ],
        max_tokens=inp.max_tokens,
        num_retries=0,
    )
    return resp.choices[0].message.content or ""


class _Arms:
    #: The failover arm's role (``--role``): ``plain`` never hedges; ``hedged`` plans a
    #: hedge, so its first attempt is the workflow's, not ``first_call``'s.
    role = "plain"
    """The callables of each arm and the workflow ids they started (for history sizes)."""

    def __init__(
        self, client: Client, harness: Any, bare_tq: str, base_url: str, queued: Any = None
    ) -> None:
        self.client, self.h, self.bare_tq, self.base = client, harness, bare_tq, base_url
        self.queued = queued  # the harness with dispatch="queue"
        self.http = httpx.AsyncClient()
        self.ids: dict[str, list[str]] = {}

    def _id(self, arm: str) -> str:
        wf_id = f"oh-{arm}-{uuid.uuid4().hex[:10]}"
        self.ids.setdefault(arm, []).append(wf_id)
        return wf_id

    def _input(self, activity_name: str = "bare_llm_call") -> BareCallInput:
        prompt = f"overhead {uuid.uuid4().hex[:8]}"
        # The failover role's system prompt: every arm sends the same request.
        system = self.h.policy.roles[self.role].system_prompt
        return BareCallInput(
            base_url=self.base, model=MODEL, prompt=prompt, system=system, activity=activity_name
        )

    async def httpx(self) -> None:
        from agent_failover.testing.bare import post_messages

        await post_messages(self.http, self._input())

    async def bare(self, activity_name: str = "bare_llm_call", arm: str = "bare") -> None:
        await self.client.execute_workflow(
            BareCallWorkflow.run,
            self._input(activity_name),
            id=self._id(arm),
            task_queue=self.bare_tq,
            result_type=str,
        )

    async def litellm(self) -> None:
        await self.bare("litellm_call", "litellm")

    async def failover(self, arm: str = "failover", harness: Any = None) -> None:
        req = ChatRequest(
            messages=[Message(role="user", content=f"overhead {uuid.uuid4().hex[:8]}")],
            max_tokens=64,
        )
        await self.client.execute_workflow(
            ResilientTextWorkflow.run,
            CallInput(role=self.role, request=req),
            id=self._id(arm),
            task_queue=(harness or self.h).task_queue,
            result_type=str,
        )

    async def failover_queue(self) -> None:
        await self.failover("failover-queue", self.queued)


#: The round-trip counter of this run (``--redis`` only).
ROUND_TRIPS: RedisRoundTrips | None = None


async def _sequential(op: Callable[[], Awaitable[None]], n: int) -> tuple[list[float], float, int]:
    lat, cpu0 = [], time.process_time()
    trips0 = ROUND_TRIPS.count if ROUND_TRIPS else 0
    for _ in range(n):
        t0 = time.perf_counter()
        await op()
        lat.append(time.perf_counter() - t0)
    trips = (ROUND_TRIPS.count if ROUND_TRIPS else 0) - trips0
    return lat, time.process_time() - cpu0, trips


async def _concurrent(
    op: Callable[[], Awaitable[None]], n: int, width: int = CONCURRENCY
) -> tuple[float, float]:
    sem = asyncio.Semaphore(width)

    async def one() -> None:
        async with sem:
            await op()

    t0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - t0, time.process_time() - cpu0


async def _history(client: Client, ids: list[str]) -> dict[str, float]:
    sizes, events, waits = [], [], []
    for wf_id in ids:
        hist = await client.get_workflow_handle(wf_id).fetch_history()
        sizes.append(sum(e.ByteSize() for e in hist.events))
        events.append(len(hist.events))
        scheduled = {}
        for e in hist.events:
            t = e.event_time.ToDatetime()
            if e.HasField("activity_task_scheduled_event_attributes"):
                scheduled[e.event_id] = t
            if e.HasField("activity_task_started_event_attributes"):
                at = scheduled[e.activity_task_started_event_attributes.scheduled_event_id]
                waits.append((t - at).total_seconds())
    return {
        "history_bytes_per_call": round(sum(sizes) / len(sizes)),
        "history_events_per_call": round(sum(events) / len(events), 1),
        "activity_start_wait_ms_p50": round(percentile([w * 1000 for w in waits], 50) or 0.0, 2),
    }


def _ms(values: list[float], q: float) -> float:
    return round((percentile([v * 1000 for v in values], q) or 0.0), 1)


async def _measure(
    arms: _Arms, names: list[str], args: argparse.Namespace, probe: Any = None
) -> dict[str, Any]:
    """Every arm in ``names``, interleaved; ``probe`` (a ``run_facts.ChildCPU``) adds the
    CPU per call its child processes spent during each arm's concurrent batches."""
    ops = {n: getattr(arms, n.replace("-", "_")) for n in names}
    for op in ops.values():  # warm-up: connections, sandbox imports, first workflow tasks
        for _ in range(3):
            await op()
    arms.ids.clear()
    lat: dict[str, list[float]] = {n: [] for n in names}
    seq: dict[tuple[str, str], float] = {}
    conc: dict[tuple[str, str, int], float] = {}
    for _ in range(args.rounds):
        for n, op in ops.items():
            got, c, t = await _sequential(op, args.batch)
            lat[n] += got
            _add(seq, (n, "cpu"), c)
            _add(seq, (n, "trips"), t)
        for width in args.concurrency:
            for n, op in ops.items():
                before = probe.seconds() if probe else {}
                w, c = await _concurrent(op, args.concurrent, width)
                _add(conc, (n, "wall", width), w)
                _add(conc, (n, "cpu", width), c)
                after = probe.seconds() if probe else {}
                for child, b in before.items():
                    if b is not None and after[child] is not None:
                        _add(conc, (n, child, width), after[child] - b)
    return {n: await _arm_figures(arms, n, args, lat[n], seq, conc) for n in names}


def _add(acc: dict[Any, float], key: Any, value: float) -> None:
    acc[key] = acc.get(key, 0.0) + value


async def _arm_figures(
    arms: _Arms,
    n: str,
    args: argparse.Namespace,
    lat: list[float],
    seq: dict[tuple[str, str], float],
    conc: dict[tuple[str, str, int], float],
) -> dict[str, Any]:
    calls_seq, calls_conc = args.rounds * args.batch, args.rounds * args.concurrent
    out: dict[str, Any] = {
        "p50_ms": _ms(lat, 50),
        "p95_ms": _ms(lat, 95),
        "p99_ms": _ms(lat, 99),
        "cpu_ms_per_call_sequential": round(seq[n, "cpu"] / calls_seq * 1000, 2),
    }
    if ROUND_TRIPS is not None:
        out["redis_round_trips_per_call"] = round(seq[n, "trips"] / calls_seq, 2)
    for (arm, kind, w), total in conc.items():
        if arm != n:
            continue
        if kind == "wall":
            out[f"throughput_per_s_c{w}"] = round(calls_conc / total, 1)
        else:  # this process's CPU ("cpu") or a child's, named
            prefix = "" if kind == "cpu" else f"{kind}_"
            out[f"{prefix}cpu_ms_per_call_c{w}"] = round(total / calls_conc * 1000, 2)
    if n != "httpx":
        out |= await _history(arms.client, arms.ids[n][: args.history_sample])
    return out


def run_setup(args: argparse.Namespace, load_before: str | None) -> dict[str, Any]:
    """What every arm of a run shared: its sizes and the machine's load around it."""
    return {
        "simulator_extra_ttft_ms": args.ttft_ms,
        "rounds": args.rounds,
        "sequential_calls_per_arm": args.rounds * args.batch,
        "concurrent_calls_per_arm": args.rounds * args.concurrent,
        "concurrency": args.concurrency,
        "failover_role": getattr(args, "role", "plain"),
        "load_average_before": load_before,
        "load_average_after": loadavg(),
    }


def _ratios(res: dict[str, Any]) -> dict[str, Any]:
    bare = res["bare"]
    out = {}
    for n, r in res.items():
        if n == "bare":
            continue
        out[f"{n}_vs_bare"] = {
            "p50": round(r["p50_ms"] / bare["p50_ms"], 2),
            "p99": round(r["p99_ms"] / bare["p99_ms"], 2),
        }
        for key in sorted(
            k for k in r if k.startswith(("throughput_per_s_c", "cpu_ms_per_call_c"))
        ):
            width = key.rpartition("_c")[2]
            kind = "throughput" if key.startswith("throughput") else "cpu_per_call"
            out[f"{n}_vs_bare"][f"{kind}_c{width}"] = round(r[key] / bare[key], 2)
        if "history_bytes_per_call" in r:
            out[f"{n}_vs_bare"]["history_bytes"] = round(
                r["history_bytes_per_call"] / bare["history_bytes_per_call"], 2
            )
    return out


class SimProcess:
    """The simulator in a child process (``failover sim``), with the in-process API used here."""

    def __init__(self) -> None:
        with socket.socket() as s:  # a free loopback port for the child
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        code = "import sys; from agent_failover.testing.sim.server import "
        code += "run_simulator_blocking as r; r(int(sys.argv[1]))"
        self.proc = spawn_tied(
            [sys.executable, "-c", code, str(self.port)], stdout=subprocess.DEVNULL
        )
        self._config = load_sim_config(None)

    async def ready(self, timeout_s: float = 30.0) -> SimProcess:
        async with httpx.AsyncClient() as http:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    if (await http.get(f"{self.url}/_admin/health")).status_code == 200:
                        return self
                except httpx.TransportError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise
                await asyncio.sleep(0.1)

    def base_url(self, endpoint: str) -> str:
        return self._config.endpoint(endpoint).base_url(self.url)

    def endpoint_config(self, endpoint: str) -> Any:
        """The :class:`EndpointConfig` of one simulated endpoint (as the simulator's own)."""
        return self._config.endpoint(endpoint).to_endpoint_config(self.url)

    async def stop(self) -> None:
        stop_process(self.proc)


@asynccontextmanager
async def bench_stack(
    ttft_ms: float,
    *,
    sim_in_process: bool = False,
    redis_url: str | None = None,
    queued: bool = True,
    with_litellm: bool = True,
    arms_class: type[_Arms] | None = None,
) -> AsyncIterator[tuple[_Arms, list[str]]]:
    """Simulator, dev server and the arms' workers, running; yields the arms and their names.

    ``queued``: also the ``failover-queue`` arm's harness; ``with_litellm``: the LiteLLM
    arm when the ``bench`` extra is installed; ``arms_class``: an :class:`_Arms` subclass
    with more arms. Everything is stopped on the way out.
    """
    sim: Any = await (start_simulator(port=0) if sim_in_process else SimProcess().ready())
    os.environ["SIM_URL"] = sim.url
    admin = SimAdmin(sim.url)
    await admin.set_faults(PRIMARY, [{"kind": "slow_first_token", "seconds": ttft_ms / 1000}])
    env = await start_dev_server(ui=False)
    policy = with_test_roles(load_policy(DEFAULT_POLICY_PATH))
    h, workers = await make_harness(env.client, policy, redis_url=redis_url)
    hq, queued_workers = (None, [])
    if queued:
        hq, queued_workers = await make_harness(
            env.client, policy, redis_url=redis_url, dispatch="queue"
        )
    bare_tq = f"bare-{uuid.uuid4().hex[:8]}"
    http = httpx.AsyncClient(limits=httpx.Limits(max_connections=64))
    bare_acts = BareActivities(http)  # the call, and the local activity of floor_parts' arms
    acts: list[Any] = [bare_acts.call, bare_acts.context]
    names = ["httpx", "bare", "failover"] + (["failover-queue"] if queued else [])
    if with_litellm and litellm is not None:
        acts.append(litellm_call)
        names.append("litellm")
    bare_worker = Worker(
        env.client,
        task_queue=bare_tq,
        workflows=[BareCallWorkflow],
        activities=acts,
        max_concurrent_activities=64,
    )
    arms = (arms_class or _Arms)(env.client, h, bare_tq, sim.base_url(PRIMARY), queued=hq)
    try:
        async with running([*workers, *queued_workers, bare_worker]):
            yield arms, names
    finally:
        await arms.http.aclose()
        await http.aclose()
        await env.shutdown()
        await admin.aclose()
        await sim.stop()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start simulator and dev server, run the arms interleaved, return the document."""
    global ROUND_TRIPS
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0") if args.redis else None
    if redis_url:
        ROUND_TRIPS = RedisRoundTrips().install()
    async with bench_stack(
        args.ttft_ms, sim_in_process=args.sim_in_process, redis_url=redis_url
    ) as (arms, names):
        arms.role = args.role
        if args.arms:
            names = [n for n in names if n in {"bare", *args.arms}]
        load_before = loadavg()
        res = await _measure(arms, names, args)
    return {
        "setup": run_setup(args, load_before)
        | {
            "health_store": "redis" if args.redis else "memory",
            "simulator": "in this process" if args.sim_in_process else "child process",
            "failover_dispatch": arms.h.activities and "eager (default); failover-queue: queue",
            "litellm": "installed" if litellm is not None else None,
        },
        "arms": res,
        "ratios": _ratios(res),
    }


def draw(doc: dict[str, Any], path: str) -> None:
    """p50/p99 latency bars and throughput at concurrency 16, per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = doc["arms"]
    names = list(arms)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    xs = range(len(names))
    a1.bar([x - 0.2 for x in xs], [arms[n]["p50_ms"] for n in names], width=0.4, label="p50")
    a1.bar([x + 0.2 for x in xs], [arms[n]["p99_ms"] for n in names], width=0.4, label="p99")
    a1.set_xticks(list(xs), names)
    a1.set_ylabel("ms per call (sequential)")
    a1.legend()
    widths = doc["setup"].get("concurrency") or [CONCURRENCY]
    step = 0.8 / len(widths)
    for i, width in enumerate(widths):
        off = -0.4 + step * (i + 0.5)
        ys = [arms[n][f"throughput_per_s_c{width}"] for n in names]
        a2.bar([x + off for x in xs], ys, width=step, label=f"c{width}")
    a2.set_xticks(list(xs), names)
    a2.set_ylabel("calls/s at concurrency")
    a2.legend()
    save_figure(fig, "Healthy-path overhead (arms interleaved, one run)", path)


def save_figure(fig: Any, title: str, path: str) -> None:
    """Title, lay out, write at 120 dpi and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print (and optionally write) JSON, optionally draw."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=20, help="sequential calls per arm per round")
    ap.add_argument(
        "--concurrent", type=int, default=64, help="calls per arm per round at each concurrency"
    )
    ap.add_argument(
        "--concurrency",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[CONCURRENCY],
        help="calls in flight for the concurrent part, comma-separated (e.g. 16,64)",
    )
    ap.add_argument(
        "--arms",
        type=lambda v: v.split(","),
        default=None,
        help="only these arms, comma-separated (bare is always kept: the ratios need it)",
    )
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument(
        "--role",
        default="plain",
        help="the failover arm's role: plain (never hedges) or hedged (its plan hedges)",
    )
    ap.add_argument("--history-sample", type=int, default=20)
    ap.add_argument("--redis", action="store_true", help="health store and cache in Redis")
    ap.add_argument(
        "--sim-in-process",
        action="store_true",
        help="run the simulator in this process (its CPU then counts in every arm's)",
    )
    ap.add_argument("--out", default=None)
    ap.add_argument("--png", default=None)
    args = ap.parse_args(argv)
    emit(asyncio.run(run(args)), args.out, args.png, draw)
    return 0


def emit(
    doc: dict[str, Any],
    out: str | None,
    png: str | None,
    drawer: Callable[[dict[str, Any], str], None],
) -> None:
    """Draw the PNG (its path recorded in the document), write the JSON, print it."""
    if png:
        Path(png).parent.mkdir(parents=True, exist_ok=True)
        drawer(doc, png)
        doc["png"] = png
    text = json.dumps(doc, indent=2)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    raise SystemExit(main())
