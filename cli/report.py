"""``failover report --since 1h``: the dashboard's figures in the terminal, as tables.

Runs come from Temporal's visibility store (every workflow started in the window, but our
monitor, qualification and shadow runs); what each call did comes from the completed
pipelines' results and, for every other run that called ``resilient_complete`` (a user's
own workflow, with or without the failover search attributes), from its history
(:mod:`agent_failover.cli.report_history`); ``--metrics-url`` adds the
breaker states and times to restoration a worker's scrape endpoint serves.
:func:`build_report` is pure (runs in, figures out), so the figures are testable without
a server.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from rich.table import Table

from agent_failover.codec import ENV_KEYS
from agent_failover.resilience.contracts import AgentOutput, Capability
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.percentile import percentile

#: Error classes that are semantic validation failures (the pass rate's "fail").
SEMANTIC = {
    ErrorClass.EMPTY_OUTPUT.value,
    ErrorClass.TRUNCATED_OUTPUT.value,
    ErrorClass.INVALID_OUTPUT.value,
    ErrorClass.MALFORMED_TOOL_CALL.value,
}
#: Runs read at most (newest first); the report says when it stopped there.
DEFAULT_LIMIT = 500
_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_NOT_TRIED = ("skipped", "cancelled", "pending", "miss")


def parse_since(text: str) -> timedelta:
    """``90s``, ``30m``, ``1h``, ``2d``: a window; ``ValueError`` saying the format."""
    m = _SINCE.match(text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"--since: expected a duration like 30m, 1h or 2d, got {text!r}")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


@dataclass
class RunFacts:
    """What the report needs from one run."""

    workflow_id: str
    workflow_type: str
    status: str
    worst_tier: int | None = None
    failover_count: int = 0
    degraded: bool = False
    escalation: str = "none"
    steps: list[tuple[str, AgentOutput]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    #: The result could not be decoded here (e.g. encrypted and no key set for the CLI).
    unreadable: bool = False
    #: The ``resilient_complete`` calls read from history (runs other than completed
    #: pipelines): ``CallFacts`` with the same role/tier/capability/attempts fields.
    calls: list[Any] = field(default_factory=list)


@dataclass
class Report:
    """Every figure of the report, as rows ready for tables."""

    runs: int
    overview: list[tuple[str, str]]
    roles: list[tuple[str, ...]]
    routes: list[tuple[str, ...]]
    saga: list[tuple[str, int]]


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "–"


def _ms(values: list[float], q: float) -> str:
    value = percentile(values, q)
    return "–" if value is None else f"{value:.0f}"


def build_report(runs: list[RunFacts]) -> Report:
    """The figures of ``runs``: overview, per role, per route, saga."""
    steps = [(step, out) for r in runs for step, out in r.steps]
    steps += [(call.role, call) for r in runs for call in r.calls]
    statuses = Counter(r.status for r in runs)
    escalations = Counter(r.escalation for r in runs if r.escalation != "none")
    tiers = Counter(r.worst_tier for r in runs if r.worst_tier is not None)
    degraded = sum(r.degraded for r in runs)
    below_full = sum(o.capability is not Capability.FULL for _, o in steps)
    overview = [
        ("runs", str(len(runs))),
        *((f"  {s}", str(n)) for s, n in sorted(statuses.items())),
        ("degraded runs", f"{degraded} ({_pct(degraded, len(runs))})"),
        ("failovers (steps off tier 0)", str(sum(r.failover_count for r in runs))),
        ("worst tier", ", ".join(f"{t}: {n}" for t, n in sorted(tiers.items())) or "–"),
        ("escalations", ", ".join(f"{s}: {n}" for s, n in sorted(escalations.items())) or "none"),
        ("answers below full capability", _pct(below_full, len(steps))),
    ]
    unreadable = sum(r.unreadable for r in runs)
    if unreadable:
        overview.append(
            (
                "results not readable here",
                f"{unreadable} (encrypted? set {ENV_KEYS} for the CLI as for the worker)",
            )
        )
    saga = Counter(a for r in runs for a in r.actions)
    return Report(
        runs=len(runs),
        overview=overview,
        roles=_role_rows([o for _, o in steps]),
        routes=_route_rows([o for _, o in steps]),
        saga=sorted(saga.items()),
    )


def _role_rows(outputs: list[AgentOutput]) -> list[tuple[str, ...]]:
    by_role: dict[str, list[AgentOutput]] = defaultdict(list)
    for out in outputs:
        by_role[out.role].append(out)
    rows = []
    for role, outs in sorted(by_role.items()):
        tried = [[a for a in o.attempts if a.outcome not in _NOT_TRIED] for o in outs]
        substituted = sum(1 for o in outs if o.tier > 0)
        degraded = sum(1 for o in outs if o.capability is not Capability.FULL)
        depth = sum(max(len(t), 1) for t in tried) / len(outs)
        judged = [a for t in tried for a in t if a.outcome == "ok" or a.outcome in SEMANTIC]
        passed = sum(1 for a in judged if a.outcome == "ok")
        rows.append(
            (
                role,
                str(len(outs)),
                f"{substituted} ({_pct(substituted, len(outs))})",
                _pct(degraded, len(outs)),
                f"{depth:.2f}",
                _pct(passed, len(judged)),
            )
        )
    return rows


def _route_rows(outputs: list[AgentOutput]) -> list[tuple[str, ...]]:
    attempts: dict[str, list[Any]] = defaultdict(list)
    for out in outputs:
        for a in out.attempts:
            if a.outcome not in _NOT_TRIED and a.route not in ("cache", "static"):
                attempts[a.route].append(a)
    rows = []
    for route, recs in sorted(attempts.items()):
        ok = [a for a in recs if a.outcome == "ok"]
        lat = [a.latency_ms for a in ok if a.latency_ms is not None]
        ttft = [a.ttft_ms for a in ok if a.ttft_ms is not None]
        errors = Counter(a.outcome for a in recs if a.outcome != "ok")
        rows.append(
            (
                route,
                str(len(recs)),
                _pct(len(ok), len(recs)),
                _ms(lat, 50),
                _ms(lat, 95),
                _ms(lat, 99),
                _ms(ttft, 50),
                _ms(ttft, 95),
                ", ".join(f"{c} {n}" for c, n in errors.most_common(3)) or "–",
            )
        )
    return rows


def report_tables(report: Report, since: str) -> list[Table]:
    """The report as rich tables."""
    overview = Table(title=f"failover report: last {since}", show_header=False)
    for k, v in report.overview:
        overview.add_row(k, v)
    roles = Table(title="by role")
    for col in ("role", "calls", "substituted", "degraded", "cascade depth", "validation pass"):
        roles.add_column(col, justify="left" if col == "role" else "right")
    for row in report.roles:
        roles.add_row(*row)
    routes = Table(title="by route (latency and TTFT in ms, answered attempts)")
    for col in ("route", "attempts", "ok", "p50", "p95", "p99", "ttft p50", "ttft p95", "errors"):
        routes.add_column(col, justify="left" if col in ("route", "errors") else "right")
    for row in report.routes:
        routes.add_row(*row)
    tables = [overview, roles, routes]
    if report.saga:
        saga = Table(title="side effects (saga)")
        saga.add_column("action status")
        saga.add_column("count", justify="right")
        for status, n in report.saga:
            saga.add_row(status, str(n))
        tables.append(saga)
    return tables
