"""Benchmark: what importing agent-failover's names costs, next to Temporal's own.

Each case runs in a fresh interpreter under ``python -X importtime`` (several repetitions,
interleaved so load on the machine hits every case alike), timing the statement (wall
clock, ``perf_counter``, and CPU seconds) and counting the modules it loaded. The time is
the statement's own, not a sum of ``-X importtime`` lines: a module our facade loads with
``importlib.import_module`` (PEP 562) gets no line of its own, so such a sum leaves out its
class bodies. The ``-X importtime`` lines give the heaviest modules, by self time, that a
case loads beyond the baseline (``heaviest_self_ms``: what is left to trim; a module loaded
by ``import_module`` shows there only through what it imports). The baseline is what any
workflow file already pays: ``import temporalio.workflow`` and ``pydantic``. Ratios are
the case's median over the baseline's median. Prints one JSON document. Usage::

    .venv/bin/python bench/import_cost.py --repeat 7
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass

BASELINE = "import temporalio.workflow, pydantic"
CASES = {
    "baseline": BASELINE,
    # the workflow side: what a workflow file imports
    "workflow_side": "from agent_failover import resilient_complete, ChatRequest, Message, "
    "AgentOutput, CallOptions",
    # the worker side: the plugin and everything it registers
    "worker_side": "from agent_failover import FailoverPlugin",
}
PROBE = (
    "import sys, time; t = time.process_time(); w = time.perf_counter(); {stmt}; "
    "print(len(sys.modules), time.process_time() - t, time.perf_counter() - w)"
)
#: How many modules ``heaviest`` lists per case.
HEAVIEST = 12
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def _self_us(stderr: str) -> dict[str, int]:
    """``{module: self µs}`` from ``-X importtime`` lines."""
    return {m[4]: int(m[1]) for line in stderr.splitlines() if (m := _LINE.match(line))}


@dataclass
class Run:
    """One statement in one fresh interpreter."""

    import_s: float  # wall clock of the statement
    cpu_s: float
    modules: int  # in sys.modules afterwards
    self_us: dict[str, int]  # self µs of each module it imported (start-up ones left out)


#: What the interpreter imports before running any statement (site, encodings...).
_STARTUP: set[str] = set()


def _probe(stmt: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROBE.format(stmt=stmt)],
        capture_output=True,
        text=True,
        check=True,
    )


def run_once(stmt: str) -> Run:
    if not _STARTUP:
        _STARTUP.update(_self_us(_probe("pass").stderr))
    proc = _probe(stmt)
    modules, cpu_s, wall_s = proc.stdout.split()
    own = {k: us for k, us in _self_us(proc.stderr).items() if k not in _STARTUP}
    return Run(float(wall_s), float(cpu_s), int(modules), own)


def heaviest(runs: list[Run], besides: set[str], n: int = HEAVIEST) -> dict[str, float]:
    """The ``n`` modules (not in ``besides``) with the largest median self time (ms)."""
    names = {k for r in runs for k in r.self_us} - besides
    med = {k: statistics.median(r.self_us.get(k, 0) for r in runs) for k in names}
    return {k: round(med[k] / 1000, 1) for k in sorted(med, key=lambda k: -med[k])[:n]}


def measure(repeat: int) -> dict[str, object]:
    samples: dict[str, list[Run]] = {name: [] for name in CASES}
    for _ in range(repeat):
        for name, stmt in CASES.items():
            samples[name].append(run_once(stmt))
    cases: dict[str, object] = {}
    base_s = statistics.median(r.import_s for r in samples["baseline"])
    base_cpu = statistics.median(r.cpu_s for r in samples["baseline"])
    base_modules = {k for r in samples["baseline"] for k in r.self_us}
    for name, runs in samples.items():
        median_s = statistics.median(r.import_s for r in runs)
        median_cpu = statistics.median(r.cpu_s for r in runs)
        cases[name] = {
            "statement": CASES[name],
            "import_s_median": round(median_s, 4),
            "cpu_s_median": round(median_cpu, 4),
            "modules": max(r.modules for r in runs),
            "ratio_to_baseline": round(median_s / base_s, 2),
            "cpu_ratio_to_baseline": round(median_cpu / base_cpu, 2),
            # what this case adds to the baseline (for the baseline: its own heaviest)
            "heaviest_self_ms": heaviest(runs, set() if name == "baseline" else base_modules),
        }
    return {"repeat": repeat, "python": sys.version.split()[0], "cases": cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(measure(args.repeat), indent=2))


if __name__ == "__main__":
    main()
