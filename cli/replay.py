"""``failover replay``: a recorded incident served as a provider, run against policies.

For each ``--policy`` in turn: a fresh replay server (the cassette's timeline from its
start), the policy pointed at it (``SIM_URL``), a worker with the health monitor on the
embedded dev server, and the drill's open-loop load, with a progress bar. Then the
drill's per-phase table per policy, a side-by-side table when there are several, the
JSON report and one PNG panel per policy. Everything but the loading is the drill's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from agent_failover.cli.drill import (
    agent_failover_arm,
    draw_timelines,
    drill_policy,
    figure_cell,
    progress_bar,
    report_table,
    write_json,
)
from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError, validation_lines
from agent_failover.testing.drill import DrillSettings, Sample
from agent_failover.testing.drill_run import run_open_loop
from agent_failover.testing.replay.cassette import Cassette, CassetteError, load_cassette
from agent_failover.testing.replay.report import replay_settings, summarise_replay
from agent_failover.testing.replay.server import UNMATCHED_STATUS, start_replay
from agent_failover.testing.servers import start_dev_server

#: The side-by-side rows: (label, overall figure key).
_COMPARE = (
    ("answered", "success_rate"),
    ("tiers", "tier_share"),
    ("p50 ms", "p50_ms"),
    ("p99 ms", "p99_ms"),
    ("attempts/answer", "amplification"),
    ("cost vs primary", "cost_vs_all_primary"),
)


def checked_cassette(folder: Path) -> Cassette:
    """The cassette at ``folder``, or one CLI error naming what is wrong (exit 2)."""
    try:
        return load_cassette(folder)
    except CassetteError as exc:
        raise CliError(f"invalid cassette: {exc}", EXIT_BAD_INPUT) from None


def policy_labels(paths: list[Path]) -> list[str]:
    """Short names for the policies: file stems, or whole paths when stems repeat."""
    stems = [p.stem for p in paths]
    return stems if len(set(stems)) == len(stems) else [str(p) for p in paths]


def compare_table(reports: dict[str, dict[str, Any]], title: str) -> Table:
    """The overall figures of each policy, side by side."""
    table = Table(title=title)
    table.add_column("")
    for label in reports:
        table.add_column(label, justify="right")
    for name, key in _COMPARE:
        table.add_row(name, *(figure_cell(key, r["overall"].get(key)) for r in reports.values()))
    table.add_row("detection", *(_seconds(r["detection_s"]) for r in reports.values()))
    table.add_row("restoration", *(_seconds(r["restoration_s"]) for r in reports.values()))
    table.add_row("not in cassette", *(str(r["unmatched_requests"]) for r in reports.values()))
    return table


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f} s"


async def replay_one(
    client: Any, cassette: Cassette, policy_path: Path, settings: DrillSettings, console: Console
) -> tuple[dict[str, Any], list[Sample]]:
    """One policy against a fresh replay of ``cassette``: its report and samples."""
    async with await start_replay(cassette) as replay:
        policy = drill_policy(policy_path, replay.url)
        policy.role(settings.role)  # a clear error before the load starts
        prices = {name: ep.prices for name, ep in policy.endpoints.items()}
        async with agent_failover_arm(client, policy, settings.role) as arm:
            replay.seek(0.0)
            with progress_bar(
                console, f"{cassette.name} · {policy_path}", _count(settings)
            ) as tick:
                samples = await run_open_loop(settings, arm, prices, on_done=tick)
            arrivals = list(replay.state.arrivals)
        report = summarise_replay(
            cassette, settings, samples, arrivals, unmatched=replay.state.unmatched
        )
    report["policy"] = str(policy_path)
    return report, samples


def _count(settings: DrillSettings) -> int:
    return min(settings.max_requests, int(settings.rate_per_s * settings.duration_s))


async def replay_policies(
    client: Any, cassette: Cassette, policies: list[Path], settings: DrillSettings, console: Console
) -> dict[str, tuple[dict[str, Any], list[Sample]]]:
    """Each policy in turn against a fresh replay of ``cassette``, by label."""
    return {
        label: await replay_one(client, cassette, path, settings, console)
        for label, path in zip(policy_labels(policies), policies, strict=True)
    }


async def run_replay_command(
    cassette: Cassette,
    console: Console,
    *,
    policies: list[Path],
    settings: DrillSettings,
    json_path: Path | None,
    png_path: Path | None,
) -> dict[str, dict[str, Any]]:
    """The whole ``failover replay``: dev server, each policy in turn, tables, JSON, PNG."""
    env = await start_dev_server(ui=False)
    try:
        runs = await replay_policies(env.client, cassette, policies, settings, console)
    finally:
        await env.shutdown()
    for label, (report, _) in runs.items():
        console.print(report_table(report, f"replay {cassette.name} · {label}"))
        if report["unmatched_requests"]:
            console.print(
                f"{label}: {report['unmatched_requests']} request(s) went to paths the "
                f"cassette never saw (answered {UNMATCHED_STATUS})"
            )
    reports = {label: report for label, (report, _) in runs.items()}
    if len(runs) > 1:
        console.print(compare_table(reports, f"replay {cassette.name}: side by side"))
    if json_path:
        payload = {
            label: {**report, "samples": [s.as_dict() for s in samples]}
            for label, (report, samples) in runs.items()
        }
        write_json(json_path, payload)
        console.print(f"JSON: {json_path}")
    if png_path:
        draw_timelines(runs, png_path, f"replay of {cassette.name}")
        console.print(f"PNG: {png_path}")
    return reports


def load_settings(cassette: Cassette, **overrides: Any) -> DrillSettings:
    """The replay's load, or one CLI error saying which option is out of range."""
    try:
        return replay_settings(cassette, **overrides)
    except ValidationError as exc:
        problems = "; ".join(validation_lines(exc))
        raise CliError(f"invalid replay load: {problems}", EXIT_BAD_INPUT) from None
