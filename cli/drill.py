"""``failover drill``: replay an outage timeline against the simulator and report it.

Starts the simulator, an embedded Temporal dev server and a worker (memory stores, the
health monitor probing at the policy's interval) in this process, runs the drill file's
open-loop schedule through ``resilient_complete`` with a progress bar, then prints the
per-phase table, writes the JSON report and draws a PNG timeline (time to answer over
time, coloured by tier, fault windows shaded). ``bench/compare.py`` reuses the table and
the plot for the other arms.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table
from temporalio.client import Client

from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.testing.chaos_proxy import pass_through_scenario, start_chaos_proxy
from agent_failover.testing.drill import DrillFile, Sample, summarise
from agent_failover.testing.drill_run import AgentFailoverArm, Arm, run_drill
from agent_failover.testing.harness import make_harness, running
from agent_failover.testing.replay.record import Recorder
from agent_failover.testing.roles import with_test_roles
from agent_failover.testing.servers import start_dev_server
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.workflows.models import MonitorInput
from agent_failover.workflows.monitor import HealthMonitorWorkflow

#: Plot colours per tier; failures and escalations get their own marks.
TIER_COLOURS = {0: "#2ca02c", 1: "#1f77b4", 2: "#ff7f0e", 3: "#9467bd"}
_COLUMNS = (
    ("requests", "requests"),
    ("success_rate", "success"),
    ("tier_share", "tiers"),
    ("p50_ms", "p50 ms"),
    ("p95_ms", "p95 ms"),
    ("p99_ms", "p99 ms"),
    ("amplification", "calls/answer"),
    ("amplification_with_probes", "+probes"),
    ("probe_calls_per_min", "probes/min"),
    ("cost_vs_all_primary", "cost vs primary"),
)


def figure_cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "tier_share":
        return " ".join(f"t{k}:{v:.0%}" for k, v in value.items()) or "-"
    if key == "success_rate":
        return f"{value:.1%}"
    return str(value)


def report_table(report: dict[str, Any], title: str) -> Table:
    """One row per phase (and overall), plus detection and restoration in the caption."""
    table = Table(title=title, caption=_caption(report))
    table.add_column("phase")
    for _, header in _COLUMNS:
        table.add_column(header, justify="right")
    rows = [*report["phases"].items(), ("overall", report["overall"])]
    for name, fig in rows:
        table.add_row(name, *(figure_cell(k, fig.get(k)) for k, _ in _COLUMNS))
    return table


def _caption(report: dict[str, Any]) -> str:
    def s(v: float | None) -> str:
        return "never" if v is None else f"{v:.2f} s"

    return f"detection {s(report['detection_s'])} · restoration {s(report['restoration_s'])}"


def draw_timelines(
    runs: dict[str, tuple[dict[str, Any], list[Sample]]], path: str | Path, title: str
) -> None:
    """One panel per arm: time to answer against start time, by tier; faults shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(12, 3.2 * len(runs)), squeeze=False)
    for ax, (arm, (report, samples)) in zip(axes[:, 0], runs.items(), strict=True):
        for a, b, _label in report["fault_events"]:
            ax.axvspan(a, b, color="#d62728", alpha=0.12, lw=0)
        for tier, colour in TIER_COLOURS.items():
            pts = [(s.start_s, s.ttfa_s) for s in samples if s.tier == tier and s.ttfa_s]
            if pts:
                ax.scatter(*zip(*pts, strict=True), s=9, color=colour, label=f"tier {tier}")
        bad = [s.start_s for s in samples if s.outcome != "answered"]
        if bad:
            top = max([s.ttfa_s or 0.0 for s in samples] + [0.1])
            ax.scatter(bad, [top] * len(bad), marker="x", color="black", s=14, label="no answer")
        ax.set_yscale("log")
        ax.set_ylabel("time to answer (s)")
        ax.set_title(f"{arm}: {_caption(report)}", fontsize=10)
        ax.legend(loc="upper right", fontsize=7, ncol=5)
    axes[-1, 0].set_xlabel("request start (s after the timeline loaded); shaded: fault windows")
    fig.suptitle(title)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def drill_policy(policy_path: str | Path, sim_url: str) -> PolicyConfig:
    """The policy pointed at this simulator, with the test roles (``plain`` etc.)."""
    return with_test_roles(load_policy(policy_path, env={**os.environ, "SIM_URL": sim_url}))


@asynccontextmanager
async def simulator_admin() -> AsyncIterator[SimAdmin]:
    """A fresh simulator on a free loopback port and its admin client (``SIM_URL`` set)."""
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    admin = SimAdmin(sim.url)
    try:
        yield admin
    finally:
        await admin.aclose()
        await sim.stop()


@asynccontextmanager
async def agent_failover_arm(client: Client, policy: PolicyConfig, role: str) -> AsyncIterator[Arm]:
    """A worker over fresh memory stores and the health monitor; yields the arm."""
    h, workers = await make_harness(client, policy)
    async with running(workers):
        monitor = await client.start_workflow(
            HealthMonitorWorkflow.run,
            MonitorInput(
                routes=sorted(policy.endpoints),
                interval_s=policy.probes.interval_s,
                half_open_interval_s=policy.probes.half_open_interval(),
            ),
            id=f"drill-monitor-{uuid.uuid4().hex[:8]}",
            task_queue=h.task_queue,
        )
        try:
            yield AgentFailoverArm(client, h.task_queue, role)
        finally:
            await monitor.terminate("drill over")
    await h.activities.deps.http.aclose()


@contextmanager
def progress_bar(console: Console, label: str, total: int) -> Iterator[Callable[[int], None]]:
    """A transient progress bar; yields the ``on_done`` callback that advances it."""
    with Progress(
        "[bold]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda _i: bar.advance(task)


async def drill_arm(
    drill: DrillFile,
    arm: Arm,
    admin: SimAdmin,
    policy: PolicyConfig,
    console: Console,
    on_start: Callable[[], Any] | None = None,
) -> tuple[dict[str, Any], list[Sample]]:
    """Run one arm through the drill with a progress bar; its report and samples."""
    prices = {name: ep.prices for name, ep in policy.endpoints.items()}
    label = f"{drill.scenario.name} · {arm.name}"
    with progress_bar(console, label, drill.requests) as tick:
        samples, arrivals = await run_drill(
            drill, arm, admin, prices, on_done=tick, on_start=on_start
        )
    report = summarise(drill, samples, arrivals, background_calls=arm.background_calls)
    report["arm"] = arm.name
    return report, samples


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` as indented JSON, creating the folder."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


@asynccontextmanager
async def recording_front(
    admin: SimAdmin, drill: DrillFile, folder: str | Path | None
) -> AsyncIterator[tuple[str, Callable[[], Any] | None]]:
    """Without ``folder``: the simulator's URL. With it: a recording proxy in front of
    the simulator (its URL, and the hook that marks the load's start in the cassette)."""
    if folder is None:
        yield admin.url, None
        return
    recorder = Recorder(folder, upstream=admin.url, name=drill.scenario.name)
    proxy = await start_chaos_proxy(admin.url, pass_through_scenario(), recorder=recorder)

    def mark() -> None:
        recorder.mark(load=drill.drill.model_dump(), events=drill.fault_events())

    try:
        yield proxy.url, mark
    finally:
        await proxy.stop()
        recorder.close()


async def run_drill_command(
    drill: DrillFile,
    console: Console,
    *,
    policy_path: str | Path,
    json_path: str | Path | None,
    png_path: str | Path | None,
    record: str | Path | None = None,
) -> dict[str, Any]:
    """The whole ``failover drill``: stack up, drill, table, JSON, PNG, stack down
    (``record``: the providers' side of it written as a cassette to that folder)."""
    async with simulator_admin() as admin, recording_front(admin, drill, record) as (url, mark):
        policy = drill_policy(policy_path, url)
        policy.role(drill.drill.role)  # a clear error before anything starts
        env = await start_dev_server(ui=False)
        try:
            async with agent_failover_arm(env.client, policy, drill.drill.role) as arm:
                report, samples = await drill_arm(drill, arm, admin, policy, console, mark)
        finally:
            await env.shutdown()
    console.print(report_table(report, f"drill {drill.scenario.name} · agent-failover"))
    report["samples"] = [s.as_dict() for s in samples]
    if json_path:
        write_json(json_path, report)
        console.print(f"JSON: {json_path}")
    if png_path:
        draw_timelines({"agent-failover": (report, samples)}, png_path, drill.scenario.name)
        console.print(f"PNG: {png_path}")
    if record:
        console.print(f"cassette: {record}")
    return report
