"""Benchmark: what importing agent-failover's names costs, next to Temporal's own.

Each case runs in a fresh interpreter under ``python -X importtime`` (several repetitions,
interleaved so load on the machine hits every case alike), summing the cumulative
microseconds of the top-level imports of the statement, and counting the modules it
loaded. The baseline is what any workflow file already pays: ``import temporalio.workflow``
and ``pydantic``. Ratios are the case's median over the baseline's median (wall time
under ``-X importtime``; the CPU seconds of the same runs are reported too). Prints one
JSON document. Usage::

    .venv/bin/python bench/import_cost.py --repeat 7
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys

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
    "import sys, time; t = time.process_time(); {stmt}; "
    "print(len(sys.modules), time.process_time() - t)"
)
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def _top_level(stmt: str) -> tuple[dict[str, int], str]:
    """``{module: cumulative µs}`` of the imports at depth 0, and the probe's output."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROBE.format(stmt=stmt)],
        capture_output=True,
        text=True,
        check=True,
    )
    top = {}
    for line in proc.stderr.splitlines():
        m = _LINE.match(line)
        if m and len(m[3]) == 1:  # depth 0
            top[m[4]] = int(m[2])
    return top, proc.stdout


#: What the interpreter imports before running any statement (site, encodings...).
_STARTUP: set[str] = set()


def run_once(stmt: str) -> dict[str, float]:
    """One fresh interpreter: the statement's import µs (top-level cumulative, start-up
    imports left out), modules loaded, CPU seconds."""
    if not _STARTUP:
        _STARTUP.update(_top_level("pass")[0])
    top, stdout = _top_level(stmt)
    wall_us = sum(us for name, us in top.items() if name not in _STARTUP)
    modules, cpu_s = stdout.split()
    return {"import_s": wall_us / 1e6, "modules": int(modules), "cpu_s": float(cpu_s)}


def measure(repeat: int) -> dict[str, object]:
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in CASES}
    for _ in range(repeat):
        for name, stmt in CASES.items():
            samples[name].append(run_once(stmt))
    out: dict[str, object] = {"repeat": repeat, "python": sys.version.split()[0], "cases": {}}
    base = samples["baseline"]
    base_s = statistics.median(s["import_s"] for s in base)
    base_cpu = statistics.median(s["cpu_s"] for s in base)
    for name, runs in samples.items():
        median_s = statistics.median(s["import_s"] for s in runs)
        median_cpu = statistics.median(s["cpu_s"] for s in runs)
        out["cases"][name] = {  # type: ignore[index]
            "statement": CASES[name],
            "import_s_median": round(median_s, 4),
            "cpu_s_median": round(median_cpu, 4),
            "modules": max(s["modules"] for s in runs),
            "ratio_to_baseline": round(median_s / base_s, 2),
            "cpu_ratio_to_baseline": round(median_cpu / base_cpu, 2),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(measure(args.repeat), indent=2))


if __name__ == "__main__":
    main()
