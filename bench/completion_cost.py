"""Benchmark: what handing an activity's completion to Temporal's core costs, per arm.

``bench/cpu_breakdown.py`` attributes time to the line of temporalio's
``bridge.Worker.complete_activity_task`` that serializes the completion and calls into the
Rust bridge (``await self._ref.complete_activity_task(comp.SerializeToString())``). This
benchmark wraps that method in the same setup (dev server, the simulator's primary in its
own process with +50 ms to first token, in-memory stores, ``--concurrency`` calls in
flight) and, for every completion, measures on the calling thread:

* the completion's kind (local activity or not, from core's ``local_act_`` task-token
  prefix), its serialized size and the size of its result payload;
* the serialization and the synchronous part of the Rust call, each as wall time (the
  GIL is held throughout: neither releases it) and as the thread's own CPU time
  (``time.thread_time``), so the difference is time the thread was runnable but off the
  CPU (preempted while holding the GIL);
* the thread's involuntary context switches (``RUSAGE_THREAD``) and its time runnable but
  waiting for a CPU (``/proc/thread-self/schedstat``) during the call, with the same
  figures over the whole run as the base rate;
* heartbeats recorded per call (``bridge.Worker.record_activity_heartbeat``).

The probe's own clock and ``/proc`` reads are syscalls, where a pending reschedule can land,
so ``--perf`` also records the loop thread's context switches with their call stacks
(``perf record -e sched:sched_switch --call-graph dwarf``; needs ``perf`` and root or
``perf_event_paranoid`` ≤ 1) and counts, per call, its involuntary switches and those
inside the bridge's Rust completion call, by kernel entry (see :func:`preemptions`).
The arms run in alternating rounds, so both see the same machine load. Prints JSON per
arm. Usage::

    .venv/bin/python bench/completion_cost.py --calls 240 --concurrency 16 --perf
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import temporalio.bridge.worker as bridge_worker

#: core marks local-activity task tokens with this prefix (sdk-core ``task_token.rs``)
LA_PREFIX = b"local_act_"


def run_delay_ns() -> int:
    """This thread's time runnable but waiting for a CPU, so far (Linux schedstat)."""
    with open("/proc/thread-self/schedstat", "rb") as f:
        return int(f.read().split()[1])


def thread_totals() -> dict[str, float]:
    """This thread's wall clock, CPU, run-queue wait and involuntary switches, so far."""
    ru = resource.getrusage(resource.RUSAGE_THREAD)
    return {
        "wall_us": time.perf_counter_ns() / 1000,
        "cpu_us": time.thread_time_ns() / 1000,
        "run_delay_us": run_delay_ns() / 1000,
        "nivcsw": ru.ru_nivcsw,
    }


class Probe:
    """Wraps the bridge worker's completion and heartbeat calls; collects one row each."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.on = False
        self._orig_complete = bridge_worker.Worker.complete_activity_task
        self._orig_heartbeat = bridge_worker.Worker.record_activity_heartbeat

    def install(self) -> None:
        probe = self

        async def complete(self: Any, comp: Any) -> None:
            ru0, wait0 = resource.getrusage(resource.RUSAGE_THREAD), run_delay_ns()
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            data = comp.SerializeToString()
            c1 = time.thread_time_ns()
            fut = self._ref.complete_activity_task(data)
            w2, c2 = time.perf_counter_ns(), time.thread_time_ns()
            ru1, wait1 = resource.getrusage(resource.RUSAGE_THREAD), run_delay_ns()
            if probe.on:
                probe.rows.append(
                    {
                        "local": comp.task_token.startswith(LA_PREFIX),
                        "bytes": len(data),
                        "result_bytes": comp.result.completed.result.ByteSize(),
                        "ser_cpu_us": (c1 - c0) / 1000,
                        "call_cpu_us": (c2 - c1) / 1000,
                        "wall_us": (w2 - w0) / 1000,
                        "run_delay_us": (wait1 - wait0) / 1000,
                        "nivcsw": ru1.ru_nivcsw - ru0.ru_nivcsw,
                    }
                )
            await fut

        def heartbeat(self: Any, comp: Any) -> None:
            if probe.on:
                probe.heartbeats += 1
            probe._orig_heartbeat(self, comp)

        bridge_worker.Worker.complete_activity_task = complete  # type: ignore[method-assign]
        bridge_worker.Worker.record_activity_heartbeat = heartbeat  # type: ignore[method-assign]


def summarize(
    rows: list[dict[str, Any]], calls: int, heartbeats: int, whole: dict[str, float]
) -> dict[str, Any]:
    """Per kind of completion: count per call, medians, and ms per call of each column.

    ``whole``: the loop thread's totals over the run, for the base rates to compare with
    (its CPU, run-queue wait and involuntary switches per call and per ms of wall time).
    """
    out: dict[str, Any] = {"calls": calls, "heartbeats_per_call": round(heartbeats / calls, 2)}
    out["loop_thread"] = {
        "cpu_ms_per_call": round(whole["cpu_us"] / calls / 1000, 2),
        "run_delay_ms_per_call": round(whole["run_delay_us"] / calls / 1000, 2),
        "nivcsw_per_ms_wall": round(whole["nivcsw"] / (whole["wall_us"] / 1000), 4),
        "nivcsw_per_ms_cpu": round(whole["nivcsw"] / (whole["cpu_us"] / 1000), 4),
    }
    for kind in (False, True):
        rs = [r for r in rows if r["local"] is kind]
        if not rs:
            continue
        name = "local_activity" if kind else "activity"
        k: dict[str, Any] = {"per_call": round(len(rs) / calls, 2)}
        for col in ("bytes", "result_bytes"):
            k[f"median_{col}"] = statistics.median(r[col] for r in rs)
        k["preempted_share"] = round(sum(r["nivcsw"] > 0 for r in rs) / len(rs), 3)
        for col in ("ser_cpu_us", "call_cpu_us", "wall_us", "run_delay_us"):
            vals = [r[col] for r in rs]
            k[f"median_{col}"] = round(statistics.median(vals), 1)
            k[f"{col[:-3]}_ms_per_call"] = round(sum(vals) / calls / 1000, 3)
        out[name] = k
    return out


# --- perf: where the loop thread is preempted --------------------------------------------

#: the Rust entry point of ``bridge.Worker.complete_activity_task`` in perf's call stacks
_RUST_COMPLETE = "__pymethod_complete_activity_task__"


def preemptions(script: str, tid: int) -> dict[str, Any]:
    """Involuntary switches of thread ``tid`` in ``perf script`` output, by where they hit.

    An involuntary switch is a ``sched_switch`` away from the thread while it is still
    runnable (``prev_state=R``). Those inside the bridge's completion call are split by
    kernel entry: a syscall's return (``futex``: tokio unparking a worker thread for the
    spawned completion; ``eventfd write``: tokio waking its I/O driver) or a timer tick;
    ``took_cpu`` counts which threads ran instead.
    """
    out: collections.Counter[str] = collections.Counter()
    took: collections.Counter[str] = collections.Counter()
    for block in script.split("\n\n"):
        head, _, stack = block.strip().partition("\n")
        if f"prev_pid={tid} " not in head or "prev_state=R" not in head:
            continue
        out["total"] += 1
        if _RUST_COMPLETE not in stack:
            continue
        out["in_completion"] += 1
        if m := re.search(r"next_comm=(.*?) next_pid=", head):
            took[m.group(1)] += 1
        if "Waker>::wake" in stack:
            out["in_completion_eventfd_write"] += 1
        elif "entry_SYSCALL_64" in stack and "schedule_task" in stack:
            out["in_completion_futex_unpark"] += 1
        elif "timer_interrupt" in stack:
            out["in_completion_timer_tick"] += 1
        else:
            out["in_completion_other"] += 1
    return {**dict(out), "took_cpu": dict(took.most_common(5))}


class Perf:
    """``perf record`` of the loop thread's context switches, with call stacks."""

    def __init__(self) -> None:
        self.exe = shutil.which("perf") or ""
        if not self.exe:
            raise SystemExit("--perf needs perf (linux-perf) and permission to trace")
        self.dir = tempfile.mkdtemp(prefix="completion_cost_")
        self.tid = threading.get_native_id()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        data = os.path.join(self.dir, "perf.data")
        cmd = [self.exe, "record", "-q", "-e", "sched:sched_switch"]
        cmd += ["--call-graph", "dwarf,16384", "-t", str(self.tid), "-o", data]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> dict[str, Any]:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=120)
        data = os.path.join(self.dir, "perf.data")
        script = subprocess.run(
            [self.exe, "script", "-i", data], capture_output=True, text=True, check=True
        ).stdout
        shutil.rmtree(self.dir, ignore_errors=True)
        return preemptions(script, self.tid)


class _Tally:
    """One arm's completions and the loop thread's totals, summed over its rounds."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.calls = self.heartbeats = 0
        self.whole: dict[str, float] = {}
        self.perf: collections.Counter[str] = collections.Counter()
        self.perf_calls = 0
        self.took_cpu: collections.Counter[str] = collections.Counter()

    def add_perf(self, counts: dict[str, Any], calls: int) -> None:
        took = counts.pop("took_cpu")
        self.perf.update(counts)
        self.took_cpu.update(took)
        self.perf_calls += calls

    def perf_per_call(self) -> dict[str, Any]:
        """The perf counts per call, and which threads took the CPU (summed)."""
        out: dict[str, Any] = {"calls": self.perf_calls}
        out |= {f"{k}_per_call": round(v / self.perf_calls, 2) for k, v in self.perf.items()}
        return out | {"took_cpu": dict(self.took_cpu.most_common(5))}


async def _round(op: Any, probe: Probe, tally: _Tally, calls: int, conc: int) -> None:
    probe.rows, probe.heartbeats, probe.on = [], 0, True
    t0 = thread_totals()
    left = [calls]

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            await op()

    await asyncio.gather(*(worker() for _ in range(conc)))
    probe.on = False
    t1 = thread_totals()
    for k in t0:
        tally.whole[k] = tally.whole.get(k, 0.0) + t1[k] - t0[k]
    tally.rows += probe.rows
    tally.calls += calls
    tally.heartbeats += probe.heartbeats


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """The arms in alternating rounds (both see the same machine load); JSON per arm."""
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import overhead

    probe = Probe()
    probe.install()
    doc: dict[str, Any] = {"setup": vars(args), "arms": {}}
    tallies = {arm: _Tally() for arm in args.arms}
    async with overhead.bench_stack(50.0, queued=False, with_litellm=False) as (arms, _):
        for arm in args.arms:
            for _ in range(5):  # warm-up: connections, first workflow tasks
                await getattr(arms, arm)()
        per_round = args.calls // args.rounds
        for _ in range(args.rounds):
            for arm, tally in tallies.items():
                perf = Perf() if args.perf else None
                if perf:
                    perf.start()
                    await asyncio.sleep(1.0)  # perf attaches
                await _round(getattr(arms, arm), probe, tally, per_round, args.concurrency)
                if perf:
                    tally.add_perf(perf.stop(), per_round)
    for arm, t in tallies.items():
        doc["arms"][arm] = summarize(t.rows, t.calls, t.heartbeats, t.whole)
        if args.perf:
            doc["arms"][arm]["perf_switches"] = t.perf_per_call()
    doc["load_avg"] = os.getloadavg()
    return doc


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the arms, print JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", nargs="+", default=["bare", "failover"], choices=["bare", "failover"])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=4, help="alternating rounds per arm")
    ap.add_argument(
        "--perf", action="store_true", help="also record the loop thread's switches (perf)"
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    doc = asyncio.run(run(args))
    text = json.dumps(doc, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
