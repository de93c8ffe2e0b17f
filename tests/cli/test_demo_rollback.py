"""The demo's rollback phase: specialists get a side-effecting tool and the later action
is made to fail; the saga table and the self-check read the compensation log."""

from __future__ import annotations

from rich.console import Console

from agent_failover.cli import demo, demo_phases
from agent_failover.resilience.pipeline import FailoverSummary
from agent_failover.resilience.saga import CompensationLog, SideEffect
from agent_failover.workflows.models import (
    ActionResult,
    ActionStatus,
    PipelineOptions,
    PipelineResult,
)


def _result(*, rolled_back: bool) -> PipelineResult:
    log = CompensationLog()
    log.append(
        SideEffect(
            step="analyst#1/create_ticket",
            tool="create_ticket",
            idempotency_key="v1-a",
            compensation_tool="close_ticket",
            compensation_args={"id": "T-1"},
            result={"id": "T-1"},
        )
    )
    undone = [log.mark_compensated("v1-a").model_copy()] if rolled_back else []
    return PipelineResult(
        answer="ok",
        confidence=1.0,
        degraded=False,
        sections=[],
        steps=[],
        summary=FailoverSummary(),
        actions=[
            ActionResult(
                step="action#1",
                tool="post_message",
                idempotency_key="v1-b",
                status=ActionStatus.FAILED,
                error="tool_rejected: HTTP 400",
            )
        ],
        compensated=undone,
        compensation_log=log,
    )


def test_rollback_phase_gives_specialists_a_tool_and_fails_the_action() -> None:
    [phase] = [p for p in demo_phases.phases() if p.name.startswith("1b")]
    opts = PipelineOptions(**phase.options)
    assert {t.role for t in opts.agent_tools} == {"researcher", "analyst"}
    assert [t.name for t in opts.agent_tools] == ["create_ticket", "create_ticket"]
    assert [a.tool for a in opts.actions] == list(phase.tool_faults) == ["post_message"]


def test_saga_table_and_check_read_the_compensation_log() -> None:
    console = Console(record=True, width=200)
    console.print(demo.saga_table(_result(rolled_back=True), "side effects"))
    text = console.export_text()
    assert "analyst#1/create_ticket" in text and "close_ticket" in text
    assert "compensated" in text and "failed: tool_rejected" in text
    assert demo._tool_rollbacks(_result(rolled_back=True)) == ["analyst#1/create_ticket"]
    assert demo._tool_rollbacks(_result(rolled_back=False)) == []


def test_saga_table_shows_maybe_applied_and_nothing_applied() -> None:
    """An effect logged after an ambiguous failure reads maybe_applied, then how it ended."""
    result = _result(rolled_back=False)
    assert result.compensation_log is not None
    maybe = SideEffect(
        step="action#1",
        tool="post_message",
        idempotency_key="v1-b",
        compensation_tool="delete_message",
        compensation_args={"effect_key": "v1-b"},
    )
    result.compensation_log.append(maybe, maybe_applied=True)
    console = Console(record=True, width=200)
    console.print(demo.saga_table(result, "side effects"))
    assert "maybe_applied" in console.export_text()
    result.compensation_log.mark_compensated("v1-b", nothing_applied=True)
    console = Console(record=True, width=200)
    console.print(demo.saga_table(result, "side effects"))
    assert "compensated (nothing applied)" in console.export_text()
