"""Soak: does a worker's memory and its Redis state stay flat over a long run under faults?

Starts the simulator (a child process), the embedded Temporal dev server and one worker
as a separate process (``python worker.py`` with the bundled demo policy, Redis health
store and cache under a fresh namespace), then starts ``--rate`` pipelines a minute
(open loop: pipeline *i* starts at ``i * 60 / rate`` s whatever the earlier ones are
doing) for ``--minutes`` while a fault cycles on the simulator every ``--fault-period-s``
(healthy, region down, provider down, the big two down: the demo's outage steps, see
:mod:`agent_failover.cli.demo_phases`; escalation off, so every pipeline ends).

Every ``--sample-s`` it samples the worker's RSS (psutil) with the pipelines finished so
far. At the end it prints JSON:

* ``rss``: the samples and the slope over the last half of the run, as MB per 1,000
  pipelines and MB per minute (least squares);
* ``redis``: the namespace's keys per route (``NS:h:{route}:...``) and per other family,
  by kind (the part after the route, minus a trailing bucket number); ``untimed`` lists
  the kinds without a TTL with their size (``untimed_ok``: only forced breakers, the one
  key allowed none); ``keys_per_route_trend`` the busiest route's keys over the run;
* ``log``: the worker log's ERROR lines and tracebacks; ``pipelines``: what became of them.

``--png`` draws RSS against pipelines finished and against minutes. ``--tracemalloc DIR``
runs the worker with :mod:`tracemalloc` on, dumps a snapshot every ``--sample-s`` to
``DIR`` and adds the top growth between the snapshot at half time and the last one
(``tracemalloc_growth``): how the worker's growing caches were found. Usage (the 60-minute
run the docs quote)::

    .venv/bin/python bench/soak.py --minutes 60 --rate 60 --out bench/out/soak.json \
        --png bench/out/soak.png
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
import redis.asyncio as aioredis

from agent_failover.cli.demo_phases import BIG_TWO_DOWN, PROVIDER_DOWN, REGION_DOWN, TASKS
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.windows import DEFAULT_HORIZON_S
from agent_failover.stores.redis_keys import max_keys_per_route
from agent_failover.testing.procs import spawn_tied, stop_process, worker_env
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from bench.soak_figures import key_kind, key_trend, rss_figures, traceback_ends

ROOT = Path(__file__).resolve().parent.parent
#: The cycle of faults, one step every ``--fault-period-s`` (empty: all healthy).
FAULT_CYCLE: list[tuple[str, dict[str, list[dict[str, Any]]]]] = [
    ("healthy", {}),
    ("region down", REGION_DOWN),
    ("provider down", PROVIDER_DOWN),
    ("big two down", BIG_TWO_DOWN),
]
PIPELINE_TIMEOUT_S = 300.0  # a pipeline taking longer counts as failed
WORKER_START_S = 180.0  # how long the worker may take to start
#: The worker under tracemalloc: a thread dumps a snapshot every period, then it runs.
TRACE_WRAPPER = """
import itertools, os, sys, threading, time, tracemalloc
from agent_failover.service import run  # imported first: imports are not traced
tracemalloc.start(int(os.environ.get("SOAK_TRACE_FRAMES", "8")))
def dump(out, period):
    for i in itertools.count():
        time.sleep(period)
        tracemalloc.take_snapshot().dump(os.path.join(out, f"snap-{i:04d}.bin"))
threading.Thread(target=dump, args=(sys.argv[1], float(sys.argv[2])), daemon=True).start()
sys.argv = ["worker.py"]
run()
"""


def start_worker(
    args: argparse.Namespace, address: str, sim_url: str, ns: str, log_path: Path
) -> subprocess.Popen[bytes]:
    """The worker process (under tracemalloc with ``--tracemalloc``), its output in ``log_path``."""
    cmd = [sys.executable, str(ROOT / "worker.py")]
    if args.tracemalloc:
        cmd = [sys.executable, "-c", TRACE_WRAPPER, args.tracemalloc, str(args.sample_s)]
    env = worker_env(
        address=address,
        sim_url=sim_url,
        task_queue=ns,
        log_level="INFO",
        REDIS_URL=args.redis_url,
        FAILOVER_SHUTDOWN_GRACE_S="2",
        PYTHONUNBUFFERED="1",
    )
    with log_path.open("wb") as log:
        return spawn_tied(
            cmd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(ROOT),
        )


async def worker_ready(worker: subprocess.Popen[bytes], log_path: Path) -> None:
    """Wait until the worker logs that it runs (its RSS before that is start-up's)."""
    deadline = time.monotonic() + WORKER_START_S
    while "worker running" not in await asyncio.to_thread(log_path.read_text, errors="replace"):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not start: see {log_path}")
        await asyncio.sleep(0.2)


class Load:
    """The open-loop pipelines and what became of them."""

    def __init__(self, client: Any, task_queue: str) -> None:
        self.client, self.tq = client, task_queue
        self.started = self.answered = self.failed = 0
        self.errors: Counter[str] = Counter()
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def finished(self) -> int:
        return self.answered + self.failed

    def start(self) -> None:
        i = self.started
        self.started += 1
        t = asyncio.create_task(self._one(i))
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    async def _one(self, i: int) -> None:
        inp = PipelineInput(
            task=f"{TASKS[i % len(TASKS)]} (#{i})",
            options=PipelineOptions(escalate_on_critical_degraded=False),
        )
        handle = None
        try:
            handle = await self.client.start_workflow(
                AgentPipelineWorkflow.run,
                inp,
                id=f"soak-{uuid.uuid4().hex[:12]}",
                task_queue=self.tq,
                result_type=PipelineResult,
            )
            res = await asyncio.wait_for(handle.result(), PIPELINE_TIMEOUT_S)
            self.answered += bool(res.answer)
            self.failed += not res.answer
        except Exception as exc:  # counted, not raised: the soak goes on
            self.failed += 1
            self.errors[type(exc).__name__] += 1
            if handle is not None and isinstance(exc, TimeoutError):
                # Given up here, so not left running in the worker: in flight stays true.
                with contextlib.suppress(Exception):
                    await handle.terminate("soak: pipeline timeout")


async def cycle_faults(admin: SimAdmin, period_s: float, stop: asyncio.Event) -> None:
    """Step through :data:`FAULT_CYCLE` every ``period_s`` until ``stop``, then heal."""
    i = 0
    while not stop.is_set():
        await admin.clear()
        for endpoint, fs in FAULT_CYCLE[i % len(FAULT_CYCLE)][1].items():
            await admin.set_faults(endpoint, fs)
        i += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), period_s)
    await admin.clear()


async def keys_per_route(r: aioredis.Redis, ns: str) -> int:
    """The most keys any one route has in namespace ``ns`` right now."""
    per: Counter[str] = Counter()
    async for raw in r.scan_iter(match=f"{ns}:h:*", count=1000):
        per[key_kind(raw.decode(), ns)[0]] += 1
    return max(per.values(), default=0)


async def drive(
    load: Load, proc: psutil.Process, args: argparse.Namespace, admin: SimAdmin, ns: str
) -> list[dict[str, float]]:
    """Run the load for ``args.minutes`` sampling RSS and keys; return the samples."""
    stop = asyncio.Event()
    faults = asyncio.create_task(cycle_faults(admin, args.fault_period_s, stop))
    t0 = time.monotonic()
    end, gap = t0 + args.minutes * 60, 60.0 / args.rate
    samples: list[dict[str, float]] = []
    next_sample = t0
    r = aioredis.from_url(args.redis_url)
    while (now := time.monotonic()) < end:
        while load.started * gap <= now - t0:
            load.start()
        if now >= next_sample:
            rss = proc.memory_info().rss / 2**20
            anon, file_backed = rss_split(proc.pid)
            minute = round((now - t0) / 60, 3)
            keys = await keys_per_route(r, ns)
            samples.append(
                {
                    "minute": minute,
                    "pipelines": load.finished,
                    "in_flight": load.started - load.finished,
                    "rss_mb": rss,
                    "anon_mb": anon,
                    "file_mb": file_backed,
                    "keys": keys,
                }
            )
            next_sample += args.sample_s
        await asyncio.sleep(min(gap, 0.5))
    await r.aclose()
    stop.set()
    await faults
    if load.tasks:  # let the last pipelines end (bounded by their timeout)
        await asyncio.wait(set(load.tasks), timeout=PIPELINE_TIMEOUT_S)
    return samples


def rss_split(pid: int) -> tuple[float, float]:
    """(anonymous, file-backed) resident MB from ``/proc/PID/status`` (0, 0 where it is
    not there): heap growth shows in the first; code pages touched late show in the second."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0, 0.0
    kb = dict(re.findall(r"^(RssAnon|RssFile):\s+(\d+) kB", text, re.M))
    return int(kb.get("RssAnon", 0)) / 1024, int(kb.get("RssFile", 0)) / 1024


async def _size(r: aioredis.Redis, key: str, typ: str) -> int:
    """How many entries a key holds (fields, members, items; 1 for a string)."""
    sizer = {"hash": r.hlen, "set": r.scard, "list": r.llen, "zset": r.zcard}.get(typ)
    return int(await sizer(key)) if sizer else 1


async def redis_keys(url: str, ns: str) -> dict[str, Any]:
    """The namespace's keys by route and kind, and the ones without a TTL."""
    r = aioredis.from_url(url)
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    untimed: dict[str, dict[str, Any]] = {}
    try:
        async for raw in r.scan_iter(match=f"{ns}:*", count=1000):
            key = raw.decode()
            group, kind = key_kind(key, ns)
            groups[group][kind] += 1
            if await r.pttl(key) == -1:
                typ = (await r.type(key)).decode()
                u = untimed.setdefault(kind, {"keys": 0, "type": typ, "max_size": 0, "forced": 0})
                u["keys"] += 1
                u["forced"] += kind == "b" and b"forced_" in (await r.hget(key, "b") or b"")
                u["max_size"] = max(u["max_size"], await _size(r, key, typ))
    finally:
        await r.aclose()
    routes = {g: dict(c) for g, c in sorted(groups.items()) if g.startswith("route:")}
    per_route = [sum(c.values()) for c in routes.values()]
    return {
        "namespace": ns,
        "keys": sum(sum(c.values()) for c in groups.values()),
        "routes": len(routes),
        "max_keys_per_route": max(per_route, default=0),
        "mean_keys_per_route": round(sum(per_route) / len(per_route), 1) if per_route else 0,
        "per_route": routes,
        "other": {g: dict(c) for g, c in sorted(groups.items()) if not g.startswith("route:")},
        "untimed": untimed,
    }


async def drop_namespace(url: str, ns: str) -> None:
    """Delete the soak's keys once counted (its cache and policies would live for days)."""
    r = aioredis.from_url(url)
    try:
        keys = [k async for k in r.scan_iter(match=f"{ns}:*", count=1000)]
        for i in range(0, len(keys), 500):
            await r.delete(*keys[i : i + 500])
    finally:
        await r.aclose()


def log_counts(path: Path) -> dict[str, Any]:
    """ERROR lines and tracebacks in the worker's log, with the first few ERROR lines."""
    text = path.read_text(errors="replace") if path.exists() else ""
    errors = [ln for ln in text.splitlines() if " ERROR " in ln or ln.startswith("ERROR")]
    return {
        "path": str(path),
        "lines": text.count("\n"),
        "errors": len(errors),
        "tracebacks": text.count("Traceback (most recent call last)"),
        "first_errors": [ln[:300] for ln in errors[:5]],
        # What each traceback ended with (an activity cancelled at its timeout is logged
        # with one at WARNING by the SDK: not an error of ours, but worth seeing).
        "traceback_ends": dict(Counter(traceback_ends(text.splitlines()))),
    }


def trace_growth(trace_dir: str, top: int = 15) -> dict[str, Any]:
    """The traced heap at each snapshot, and the biggest growth between the snapshot at
    half time and the last one."""
    import tracemalloc

    paths = sorted(Path(trace_dir).glob("snap-*.bin"))
    if len(paths) < 2:
        return {}
    heap = [tracemalloc.Snapshot.load(str(p)).traces for p in paths]
    half, last = (tracemalloc.Snapshot.load(str(paths[i])) for i in (len(paths) // 2, -1))
    return {
        "traced_mb": [round(sum(t.size for t in traces) / 2**20, 2) for traces in heap],
        "top_growth": [
            {
                "kib": round(s.size_diff / 1024, 1),
                "count": s.count_diff,
                "where": [f"{f.filename}:{f.lineno}" for f in s.traceback][-6:],
            }
            for s in last.compare_to(half, "traceback")[:top]
        ],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the stack and the worker process, soak, and gather the figures."""
    from bench.overhead import SimProcess  # imports LiteLLM when installed: only to run

    ns = f"soak-{uuid.uuid4().hex[:8]}"
    log_path = Path(args.log_dir) / f"{ns}-worker.log"
    sim = await SimProcess().ready()
    admin = SimAdmin(sim.url)
    env = await start_dev_server(ui=False)
    worker = start_worker(args, env.address, sim.url, ns, log_path)
    try:
        proc = psutil.Process(worker.pid)
        await worker_ready(worker, log_path)
        load = Load(env.client, ns)
        samples = await drive(load, proc, args, admin, ns)
        keys = await redis_keys(args.redis_url, ns)
        if not args.keep_keys:
            await drop_namespace(args.redis_url, ns)
    finally:
        stop_process(worker)
        await env.shutdown()
        await admin.aclose()
        await sim.stop()
    doc: dict[str, Any] = {
        "setup": {
            "minutes": args.minutes,
            "rate_per_minute": args.rate,
            "fault_period_s": args.fault_period_s,
            "fault_cycle": [name for name, _ in FAULT_CYCLE],
            "sample_s": args.sample_s,
            "tracemalloc": bool(args.tracemalloc),
        },
        "pipelines": {
            "started": load.started,
            "answered": load.answered,
            "failed": load.failed,
            "errors": dict(load.errors),
        },
        "rss": rss_figures(samples),
        "redis": keys,
        "keys_per_route_trend": key_trend(samples),
        # What no route can exceed (stores.redis_keys.max_keys_per_route): the aggregate
        # buckets expire after the horizon, the hourly ones after a week.
        "keys_per_route_bound": max_keys_per_route(
            DEFAULT_HORIZON_S, len(load_policy(DEFAULT_POLICY_PATH).roles)
        ),
        "untimed_ok": all(u["keys"] == u["forced"] for u in keys["untimed"].values()),
        "log": log_counts(log_path),
    }
    if args.tracemalloc:
        doc["tracemalloc_growth"] = trace_growth(args.tracemalloc)
    return doc


def draw(doc: dict[str, Any], path: str) -> None:
    """Worker RSS against pipelines finished and against minutes."""
    import matplotlib

    from bench.overhead import save_figure

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = doc["rss"]["samples"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.plot([x["pipelines"] for x in s], [x["rss_mb"] for x in s], marker=".")
    a1.set_xlabel("pipelines finished")
    a1.set_ylabel("worker RSS (MB)")
    f = a1.twinx()
    f.plot([x["pipelines"] for x in s], [x["in_flight"] for x in s], color="tab:red", alpha=0.5)
    f.set_ylabel("pipelines in flight", color="tab:red")
    a2.plot([x["minute"] for x in s], [x["rss_mb"] for x in s], marker=".", color="tab:green")
    a2.set_xlabel("minutes")
    a2.set_ylabel("worker RSS (MB)")
    a2.axvline(doc["rss"]["slope_window_minutes"][0], color="grey", linestyle=":")
    k = a2.twinx()
    k.plot([x["minute"] for x in s], [x["keys"] for x in s], color="tab:orange", alpha=0.6)
    k.set_ylabel("Redis keys of the busiest route", color="tab:orange")
    slope_k = doc["rss"]["slope_mb_per_1000_pipelines"]
    title = (
        f"Soak: {doc['setup']['rate_per_minute']:g} pipelines/min, "
        f"{doc['pipelines']['started']} pipelines; last-half slope {slope_k} MB/1000"
    )
    save_figure(fig, title, path)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, soak, print (and optionally write) JSON, optionally draw."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=60.0, help="pipelines started per minute")
    ap.add_argument("--fault-period-s", type=float, default=60.0)
    ap.add_argument("--sample-s", type=float, default=15.0, help="RSS sample period")
    ap.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--log-dir", default="bench/out", help="where the worker's log goes")
    ap.add_argument("--tracemalloc", default=None, metavar="DIR", help="snapshot dir")
    ap.add_argument("--keep-keys", action="store_true", help="leave the namespace in Redis")
    ap.add_argument("--out", default=None)
    ap.add_argument("--png", default=None)
    args = ap.parse_args(argv)
    from bench.overhead import emit

    for d in (args.log_dir, args.tracemalloc):
        if d:
            Path(d).mkdir(parents=True, exist_ok=True)
    emit(asyncio.run(run(args)), args.out, args.png, draw)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
