"""The markdown a workflow shows as its current details in the Temporal UI.

A short header (worst tier, failovers, degraded steps, escalation) and one table row per
step: the tier and route that answered, its capability, reason codes and latency, and
the routes that failed before it. Pure: the workflow passes its steps in; the text is
bounded so it never bloats history.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.pipeline import FailoverSummary

#: Rows shown; older steps are summarised in one line (the full list is in the query).
MAX_ROWS = 40
#: Reason codes shown per row.
MAX_CODES = 4
#: Failed routes named per row; the rest are counted.
MAX_FAILED = 2
#: Characters per cell at most.
MAX_CELL = 120
TIER_NAMES = {0: "primary", 1: "standby", 2: "fallback", 3: "degraded"}


def step_table(
    steps: Iterable[tuple[str, AgentOutput]],
    summary: FailoverSummary,
    *,
    escalation: str = "none",
    phase: str | None = None,
) -> str:
    """The markdown details of a run: header line, then a step table."""
    rows = list(steps)
    head = (
        f"**worst tier {summary.worst_tier}** ({TIER_NAMES.get(summary.worst_tier, '?')}) · "
        f"{summary.failover_count} failover(s) · "
        f"{len(summary.degraded_steps)} degraded step(s) · escalation {escalation}"
    )
    if phase:
        head += f" · phase {phase}"
    lines = [
        head,
        "",
        "| step | tier | route | capability | reasons | latency | failed before |",
        "|---|---|---|---|---|---|---|",
    ]
    hidden = max(0, len(rows) - MAX_ROWS)
    for step, out in rows[hidden:]:
        lines.append(_row(step, out))
    if hidden:
        lines.append(f"| … {hidden} earlier step(s) | | | | | | |")
    return "\n".join(lines)


def _row(step: str, out: AgentOutput) -> str:
    codes = [c.value for c in out.reason_codes]
    shown = ", ".join(codes[:MAX_CODES]) + _more(len(codes) - MAX_CODES)
    failed = [
        f"{a.route} ({a.outcome})"
        for a in out.attempts
        if a.outcome not in ("ok", "skipped", "pending", "miss")
    ]
    latency = f"{out.latency_ms / 1000:.2f}s" if out.latency_ms else "–"
    cells = [
        _cell(step),
        str(out.tier),
        _cell(out.route or "–"),
        out.capability.value,
        _cell(shown or "–"),
        latency,
        _cell(", ".join(failed[:MAX_FAILED]) + _more(len(failed) - MAX_FAILED) or "–"),
    ]
    return "| " + " | ".join(cells) + " |"


def _more(n: int) -> str:
    return f" +{n} more" if n > 0 else ""


def _cell(text: str) -> str:
    # A pipe inside a cell would split the row; the length bound keeps history small.
    return text.replace("|", "\\|").replace("\n", " ")[:MAX_CELL]
