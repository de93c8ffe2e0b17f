"""Benchmark: where a call's CPU goes, per arm, from py-spy samples of the GIL holder.

Each arm runs in a child process (the same setup as ``bench/overhead.py``: dev server,
the simulator's primary in its own process with +50 ms to first token, in-memory stores)
that keeps 16 calls in flight. The parent records the child with ``py-spy record --gil``
(only the thread holding the GIL is sampled, so samples are Python CPU) for
``--seconds``, counts the calls finished meanwhile, and sorts every sample into one
category by the frames on its stack. Prints JSON (ms per call per category, per arm, and
the difference to ``bare``); ``--png`` draws stacked bars. Needs ``py-spy`` (the
``bench`` extra) and permission to attach to a child process (root, or
``kernel.yama.ptrace_scope=0``). Usage::

    .venv/bin/python bench/cpu_breakdown.py --out bench/out/cpu_breakdown.json \\
        --png bench/out/cpu_breakdown.png

Sampling slows the child (figures are ~1.3x the unsampled CPU per call); compare arms
within one run, not with ``bench/overhead.py``'s absolute figures. On a busy machine with
few cores a thread that holds the GIL while it waits for a core is sampled as busy in
whatever frame it is in, so a single frame can read ten times its real cost: time a frame
directly before chasing it. ``--redis URL`` runs the arms with the health store and cache
in Redis (a production worker's path; the stores' own frames get their category).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: (category, substrings of a frame's function name); a sample goes to the first category
#: any of its frames matches, so the order runs from the specific to the general.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Redis stores (client and decoding)",
        ("RedisHealthStore.", "RedisResponseCache.", "RedisSnapshots.", "RedisOutcomes."),
    ),
    ("provider call (activity body)", ("ModelCallActivities.call_model", "BareActivities.call")),
    ("role context read", ("RoleContextActivities.role_context", "role_context")),
    ("first_call: planning in the activity", ("FirstCallActivities.",)),
    ("sandbox: per-run module imports", ("Importer._import",)),
    ("workflow code", ("InSandbox.activate",)),
    (
        "payload conversion and visiting",
        (
            "PayloadVisitor",
            "encode_completion",
            "decode_activation",
            "get_serialization_context",
            "PayloadConverter",
        ),
    ),
    ("Temporal workflow worker", ("_WorkflowWorker", "_Instance.")),
    ("Temporal activity worker", ("_ActivityWorker",)),
    ("client (start, result)", ("execute_workflow", "WorkflowHandle", "start_workflow")),
)
OTHER = "other (event loop, core bridge, GC)"
_FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def categorize(frames: list[str]) -> str:
    """The category of one sample, from its frames (root first, as py-spy writes them)."""
    names = [m.group("fn") if (m := _FRAME.match(f)) else f for f in frames]
    for category, needles in CATEGORIES:
        if any(n in name for name in names for n in needles):
            return category
    return OTHER


def breakdown(raw: str, calls: int, rate_hz: float) -> dict[str, float]:
    """ms of sampled CPU per call by category, from py-spy's ``--format raw`` output."""
    if calls <= 0:
        raise ValueError("no call finished while sampling: raise --seconds")
    per_sample_ms = 1000.0 / rate_hz
    out: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")[1:]  # the first entry names the thread
        out[categorize(frames)] += int(count) * per_sample_ms / calls
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def _overhead() -> Any:
    """``bench/overhead.py``, whose setup, output and figure helpers this benchmark shares."""
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import overhead

    return overhead


# --- the child: one arm, 16 in flight, counting calls between GO and end of stdin -------


#: The child's Redis URL (``--redis``), passed in its environment.
REDIS_ENV = "CPU_BREAKDOWN_REDIS_URL"


async def _child(arm: str) -> dict[str, Any]:
    oh = _overhead()
    redis_url = os.environ.get(REDIS_ENV) or None
    stack = oh.bench_stack(50.0, queued=False, with_litellm=False, redis_url=redis_url)
    async with stack as (arms, _):
        return await _drive(getattr(arms, arm))


async def _drive(op: Any) -> dict[str, Any]:
    for _ in range(5):  # warm-up: connections, first workflow tasks
        await op()
    loop = asyncio.get_running_loop()
    print("READY", os.getpid(), flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)  # GO
    state = {"counting": True, "calls": 0}
    t0, cpu0 = time.perf_counter(), time.process_time()

    async def worker() -> None:
        while state["counting"]:
            await op()
            if state["counting"]:
                state["calls"] += 1

    tasks = [asyncio.create_task(worker()) for _ in range(16)]
    await loop.run_in_executor(None, sys.stdin.read)  # the parent closed stdin: stop
    state["counting"] = False
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await asyncio.gather(*tasks)
    n = state["calls"]
    return {
        "calls": n,
        "calls_per_s": round(n / wall, 1),
        "cpu_ms_per_call": round(cpu / n * 1000, 2),
    }


# --- the parent -------------------------------------------------------------------------


def _py_spy() -> str:
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(exe).exists():
        raise SystemExit("py-spy not found: pip install -e '.[dev,bench]' installs it")
    return exe


def _run_arm(
    arm: str,
    seconds: float,
    rate: int,
    keep: str | None,
    native: bool = False,
    redis_url: str | None = None,
) -> dict[str, Any]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", arm],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, REDIS_ENV: redis_url or ""},
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        line = child.stdout.readline()
        if not line.startswith("READY"):
            raise SystemExit(f"{arm}: the child did not start ({line!r})")
        with tempfile.NamedTemporaryFile(suffix=".txt") as raw:
            child.stdin.write("GO\n")
            child.stdin.flush()
            # --native (Rust and C frames too) needs py-spy to pause the child per sample
            mode = ["--native"] if native else ["--nonblocking"]
            spy = [_py_spy(), "record", "--gil", "--threads", *mode, "-r", str(rate)]
            spy += ["-f", "raw", "-d", str(int(seconds)), "-p", str(child.pid), "-o", raw.name]
            subprocess.run(spy, check=True, capture_output=True)
            child.stdin.close()
            result = json.loads(child.stdout.read().strip().splitlines()[-1])
            text = Path(raw.name).read_text()
            if keep:  # py-spy's raw stacks, for a closer look (e.g. with flamegraph.pl)
                Path(keep).mkdir(parents=True, exist_ok=True)
                (Path(keep) / f"{arm}.txt").write_text(text)
    finally:
        if child.poll() is None:
            child.wait(timeout=120)
    result["ms_per_call"] = breakdown(text, result["calls"], rate)
    result["sampled_ms_per_call"] = round(sum(result["ms_per_call"].values()), 2)
    return result


def draw(doc: dict[str, Any], path: str) -> None:
    """One stacked bar per arm: sampled CPU ms per call by category."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(doc["arms"])
    cats = [c for c, _ in CATEGORIES] + [OTHER]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottom = [0.0] * len(arms)
    for c in cats:
        vals = [doc["arms"][a]["ms_per_call"].get(c, 0.0) for a in arms]
        ax.bar(arms, vals, bottom=bottom, label=c)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("sampled CPU ms per call (c16)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _overhead().save_figure(fig, "Where a call's CPU goes (py-spy, GIL holder)", path)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments; as the parent run every arm and print JSON, as a child run one."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", nargs="+", default=["bare", "failover"], choices=["bare", "failover"])
    ap.add_argument("--seconds", type=float, default=12.0, help="sampling time per arm")
    ap.add_argument("--rate", type=int, default=250, help="samples per second")
    ap.add_argument("--keep-raw", default=None, metavar="DIR", help="keep py-spy's stacks here")
    ap.add_argument(
        "--native", action="store_true", help="native frames too (pauses the child per sample)"
    )
    ap.add_argument("--redis", default=None, metavar="URL", help="stores in Redis at URL")
    ap.add_argument("--out", default=None)
    ap.add_argument("--png", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(_child(args.child))), flush=True)
        return 0
    setup = {
        "seconds": args.seconds,
        "rate_hz": args.rate,
        "stores": "redis" if args.redis else "memory",
    }
    doc: dict[str, Any] = {"setup": setup, "arms": {}}
    for arm in args.arms:
        doc["arms"][arm] = _run_arm(
            arm, args.seconds, args.rate, args.keep_raw, args.native, args.redis
        )
    if "bare" in doc["arms"]:
        base = doc["arms"]["bare"]["ms_per_call"]
        doc["vs_bare_ms"] = {
            a: {c: round(v - base.get(c, 0.0), 2) for c, v in r["ms_per_call"].items()}
            for a, r in doc["arms"].items()
            if a != "bare"
        }
    _overhead().emit(doc, args.out, args.png, draw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
