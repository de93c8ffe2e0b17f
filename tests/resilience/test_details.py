"""The markdown step table a run shows as its current details in the Temporal UI."""

from __future__ import annotations

from agent_failover.resilience.contracts import AgentOutput, AttemptRecord, Capability, ReasonCode
from agent_failover.resilience.details import MAX_ROWS, step_table
from agent_failover.resilience.pipeline import summarize


def _out(role: str, tier: int, failed: list[str], cap: Capability = Capability.FULL) -> AgentOutput:
    attempts = [AttemptRecord(route=r, tier=0, started_at=0, outcome="overloaded") for r in failed]
    attempts.append(AttemptRecord(route="r|ok", tier=tier, started_at=0, outcome="ok"))
    return AgentOutput(
        role=role,
        content="x",
        capability=cap,
        tier=tier,
        route="r|ok",
        model="m",
        confidence=0.5,
        reason_codes=[ReasonCode.MODEL_UNAVAILABLE, ReasonCode.SMALLER_MODEL],
        attempts=attempts,
        latency_ms=1234.0,
    )


def test_header_and_one_row_per_step() -> None:
    """Worst tier, failovers and escalation head the table; each step names its answer,
    reasons, latency and the routes that failed before it (two named, the rest counted)."""
    steps = [
        ("planner", _out("planner", 0, [])),
        ("analyst#1", _out("analyst", 2, ["a", "b", "c"], Capability.DEGRADED)),
    ]
    text = step_table(steps, summarize(steps), escalation="pending", phase="critic")
    lines = text.splitlines()
    assert lines[0].startswith("**worst tier 2** (fallback)")
    assert "escalation pending" in lines[0] and "phase critic" in lines[0]
    assert lines[2].startswith("| step | tier | route |")
    assert (
        lines[4] == "| planner | 0 | r\\|ok | full | MODEL_UNAVAILABLE, SMALLER_MODEL | 1.23s | – |"
    )
    assert lines[5].endswith("| a (overloaded), b (overloaded) +1 more |")
    assert len(lines) == 6


def test_long_runs_keep_the_newest_rows() -> None:
    """Past MAX_ROWS steps the oldest collapse into one line: the text stays bounded."""
    steps = [(f"s{i}", _out("r", 0, [])) for i in range(MAX_ROWS + 5)]
    lines = step_table(steps, summarize(steps)).splitlines()
    assert lines[4].startswith("| s5 |") and "5 earlier step(s)" in lines[-1]
    assert len(lines) == 4 + MAX_ROWS + 1
