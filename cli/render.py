"""Rich tables for pipeline results and health, shared by ``run``, ``demo`` and ``status``."""

from __future__ import annotations

from rich.table import Table

from agent_failover.activities.health_models import (
    CostRow,
    HealthTable,
    QualificationStatus,
    QualityRow,
)
from agent_failover.resilience.breaker import Breaker
from agent_failover.resilience.budget import BucketLevel, BucketState, refill
from agent_failover.resilience.contracts import AgentOutput, BreakerState
from agent_failover.workflows.models import MonitorTable, PipelineResult

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


def age(seconds: float) -> str:
    """'3 s ago', '4 min ago', '2 h ago' (never negative)."""
    s = max(0.0, seconds)
    if s < 120:
        return f"{s:.0f} s ago"
    if s < 7200:
        return f"{s / 60:.0f} min ago"
    return f"{s / 3600:.0f} h ago"


def _probe(row, now: float) -> str:
    if row.last_probe_at is None:
        return "-"
    return f"{'ok' if row.last_probe_ok else 'failed'}, {age(now - row.last_probe_at)}"


def _window(table: HealthTable, route: str) -> str:
    w = table.context_windows.get(route)
    if w is None:
        return "-"
    if w.configured is None:
        configured = "not configured"
    else:
        configured = f"{w.configured:,} configured"
    if w.learned is None:
        return f"{w.configured:,}" if w.configured is not None else "unknown"
    return f"{w.learned:,} learned ({configured})"


def _reason(reason: str | None, breaker: Breaker | None, now: float) -> str:
    """The breaker's reason, with the half-open trial slots real calls hold: slots held
    until their leases lapse refuse further trials (``trial_slots_full``)."""
    text = reason or "-"
    if breaker is None or breaker.state is not BreakerState.HALF_OPEN:
        return text
    live = breaker.live_leases(now)
    if not live:
        return text
    lapse = min(lease.expires_at for lease in live) - now
    return f"{text}; {len(live)} trial slot(s) held, first lapses in {age(lapse)[:-4]}"


def health_table(table: HealthTable, now: float | None = None) -> Table:
    """Breaker state, rolling latency (ms) and error figures, last probe and its age,
    context window (learned, else configured) per route; the title says whether the
    shared store is degraded."""
    now = table.taken_at if now is None else now
    title = f"Route health (store: {table.store})"
    if table.store_degraded:
        since = (
            f" for {age(now - table.store_degraded_since)[:-4]}"
            if table.store_degraded_since
            else ""
        )
        title += (
            f"\n[red]store DEGRADED: Redis unreachable{since}"
            f"{f' ({table.store_error})' if table.store_error else ''}; "
            "serving this worker's local view until it returns[/]"
        )
    t = Table(title=title, title_justify="left")
    cols = ("route", "breaker", "reason", "calls", "err %", "p50 ms", "p95 ms", "p99 ms")
    # Our own saturation (calls that found a worker's connection slots all busy) is not the
    # route's fault: its own column, shown only when some route has any.
    saturated = any(row.stats.local_saturations for row in table.rows)
    extra = ("saturated",) if saturated else ()
    for col in (*cols, *extra, "last probe", "context window"):
        t.add_column(
            col,
            justify="right" if col.endswith(("ms", "%")) or col in ("calls", *extra) else "left",
        )
    trials = {b.route: b for b in table.breakers if b.trial_leases}
    for row in table.rows:
        st = row.stats
        state = row.breaker.value
        style = "green" if state in ("closed", "forced_closed") else "red"
        if state == "half_open":
            style = "yellow"
        t.add_row(
            row.route,
            f"[{style}]{state}[/]",
            _reason(row.breaker_reason, trials.get(row.route), now),
            str(st.calls),
            f"{st.error_rate * 100:.0f}",
            _ms(st.p50_ms),
            _ms(st.p95_ms),
            _ms(st.p99_ms),
            *((str(st.local_saturations),) if saturated else ()),
            _probe(row, now),
            _window(table, row.route),
        )
    return t


def budget_table(levels: list[BucketLevel], now: float) -> Table:
    """Rate budgets shared by every worker: what is left of each bucket right now."""
    t = Table(title="Rate budgets (per minute, all workers)", title_justify="left")
    for col in ("scope", "unit", "left", "per min", "reserve", "full in"):
        t.add_column(col, justify="left" if col in ("scope", "unit") else "right")
    for lv in levels:
        b = lv.bucket
        level = refill(b, BucketState(level=lv.level, at=lv.at), now).level
        style = "green" if level > b.reserve else ("yellow" if level > 0 else "red")
        full_in = (b.capacity - level) / b.per_s
        t.add_row(
            lv.scope,
            b.unit.value,
            f"[{style}]{level:,.0f}[/]",
            f"{b.capacity:,.0f}",
            f"{b.reserve:,.0f}" if b.reserve else "-",
            "-" if full_in <= 0 else f"{full_in:.0f} s",
        )
    return t


def _delta(row: QualityRow) -> str:
    if row.delta is not None:
        return f"{row.delta:.2f}"
    if row.verdict_delta is not None:
        return f"{row.verdict_delta:.2f} at verdict"
    return "-"


def quality_table(rows: list[QualityRow], now: float) -> Table:
    """Shadow-evaluation verdicts: per role and route, ``QUALITY_REGRESSION`` or ok, the
    drop of agreement with the reference (``1 - mean``) against the tolerance, and the
    samples the verdict counts against ``min_samples``."""
    t = Table(title="Shadow quality (per role, vs its reference route)", title_justify="left")
    for col in ("role", "route", "quality", "delta", "tolerance", "samples", "since"):
        t.add_column(col, justify="right" if col in ("delta", "tolerance", "samples") else "left")
    for row in rows:
        verdict = "[red]QUALITY_REGRESSION[/]" if row.regressed else "[green]ok[/]"
        t.add_row(
            row.role,
            row.route,
            verdict,
            _delta(row),
            f"{row.tolerance:.2f}",
            f"{row.samples}/{row.min_samples}",
            "-" if row.since is None else age(now - row.since),
        )
    return t


def qualification_table(rows: list[QualificationStatus]) -> Table:
    """Per qualified role: when, on which golden set, ``fresh`` or ``STALE`` (what changed
    and whether the planner still uses the lock), and the routes it leaves out."""
    t = Table(title="Qualification (the lock file, per role)", title_justify="left")
    for col in ("role", "qualified", "golden set", "lock", "never planned"):
        t.add_column(col)
    for row in rows:
        if row.stale:
            then = "unqualified: require_fresh" if row.require_fresh else "still applied"
            lock = f"[red]STALE[/]: {'; '.join(row.stale)} ({then})"
        else:
            lock = "[green]fresh[/]"
        out = ", ".join(row.unqualified) or "-"
        t.add_row(row.role, row.qualified_at, row.golden_set, lock, out)
    return t


def _per_usd(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _pct(share: float) -> str:
    """A share as a percentage with up to one decimal (0.625 -> ``62.5%``)."""
    return f"{round(share * 100, 1):g}%"


def _cost_verdict(row: CostRow, now: float) -> str:
    c = row.cost
    since = "" if c.since is None else f" ({age(now - c.since)})"
    if c.demoted and row.demoting:
        under, back = _pct(row.min_share), _pct(row.restore_share)
        return f"[red]DEMOTED[/]{since}: under {under}, back at {back}"
    if not row.demoting:
        return "tracked (demotion off)"
    if c.current_attempts < row.min_samples or c.baseline_attempts < row.min_samples:
        return f"ok (under {row.min_samples} billed attempts)"
    return f"[green]ok[/]{since}"


def cost_table(rows: list[CostRow], now: float) -> Table:
    """Tokens per dollar per route (useful tokens over every billed attempt's spend) now
    and over its 7-day baseline, the share, and the cost-efficiency verdict."""
    t = Table(title="Cost efficiency (tokens per dollar vs 7-day baseline)", title_justify="left")
    for col in ("route", "tokens/$ now", "baseline", "share", "billed now/base", "verdict"):
        t.add_column(col, justify="left" if col in ("route", "verdict") else "right")
    for row in rows:
        c = row.cost
        share = "-" if c.share is None else f"{c.share:.0%}"
        t.add_row(
            row.route,
            _per_usd(c.current_tokens_per_usd),
            _per_usd(c.baseline_tokens_per_usd),
            share,
            f"{c.current_attempts}/{c.baseline_attempts}",
            _cost_verdict(row, now),
        )
    return t


def status_extras(table: HealthTable, now: float) -> list[Table]:
    """What `failover status` prints below the route health table: rate budgets, shadow
    quality verdicts, qualification locks and cost efficiency, each only when there is
    some."""
    out = []
    if table.budgets:
        out.append(budget_table(table.budgets, now=now))
    if table.quality:
        out.append(quality_table(table.quality, now=now))
    if table.qualification:
        out.append(qualification_table(table.qualification))
    if table.cost:
        out.append(cost_table(table.cost, now=now))
    return out


def monitor_footer(mt: MonitorTable, now: float) -> str:
    """One line on the monitor itself: probing state, interval, rounds, the policy it
    follows, table age."""
    probing = "paused" if mt.paused else "active"
    every = f" every {mt.interval_s:g} s" if mt.interval_s else ""
    policy = f", policy {mt.policy_ref}" if mt.policy_ref else ""
    taken = f"; table from {age(now - mt.table.taken_at)}" if mt.table else ""
    return f"health monitor: running, probing {probing}{every}, {mt.rounds} rounds{policy}{taken}"
