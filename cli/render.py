"""Rich tables for pipeline results and health, shared by ``run``, ``demo`` and ``status``."""

from __future__ import annotations

from rich.table import Table

from agent_failover.activities.models import HealthTable
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.workflows.models import PipelineResult

TIER_STYLE = {0: "green", 1: "yellow", 2: "dark_orange", 3: "red"}


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def tier_label(out: AgentOutput) -> str:
    if out.capability.value == "static":
        return "3 static"
    if out.tier == 3:
        return "3 cache"
    return str(out.tier)


def steps_table(result: PipelineResult, title: str = "Pipeline steps") -> Table:
    """One row per step: tier, route, model, latency, attempts and reason codes."""
    t = Table(title=title, title_justify="left")
    for col in ("step", "tier", "route", "model", "latency ms", "attempts", "reason codes"):
        t.add_column(col, overflow="fold")
    for s in result.steps:
        o = s.output
        style = TIER_STYLE.get(o.tier, "white")
        tried = " → ".join(f"{a.route}:{a.outcome}" for a in o.attempts if a.outcome not in ("ok",))
        t.add_row(
            s.step,
            f"[{style}]{tier_label(o)}[/]",
            o.route or "-",
            o.model or "-",
            _ms(o.latency_ms),
            tried or "-",
            ", ".join(c.value for c in o.reason_codes) or "-",
        )
    return t


def health_table(table: HealthTable) -> Table:
    """Breaker state and rolling latency/error figures per route."""
    t = Table(title=f"Route health (store: {table.store})", title_justify="left")
    for col in ("route", "breaker", "reason", "calls", "err %", "p50", "p95", "p99", "last probe"):
        t.add_column(col)
    for row in table.rows:
        st = row.stats
        state = row.breaker.value
        style = "green" if state in ("closed", "forced_closed") else "red"
        if state == "half_open":
            style = "yellow"
        probe = "-"
        if row.last_probe_at is not None:
            probe = "ok" if row.last_probe_ok else "failed"
        t.add_row(
            row.route,
            f"[{style}]{state}[/]",
            row.breaker_reason or "-",
            str(st.calls),
            f"{st.error_rate * 100:.0f}",
            _ms(st.p50_ms),
            _ms(st.p95_ms),
            _ms(st.p99_ms),
            probe,
        )
    return t
