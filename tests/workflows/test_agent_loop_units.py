"""The agent loop's pure decisions: why it stops, and what a tool message says."""

from __future__ import annotations

import json

from agent_failover.resilience.contracts import AgentOutput, Capability
from agent_failover.resilience.models import ToolCall
from agent_failover.workflows.agent_loop import (
    MAX_TOOL_RESULT_BYTES,
    StopReason,
    ToolRun,
    _stop_reason,
    _tool_content,
)


def _out(calls: int) -> AgentOutput:
    return AgentOutput(
        role="r",
        content="",
        capability=Capability.FULL,
        tier=0,
        confidence=1.0,
        tool_calls=[ToolCall(id=f"c{i}", name="t") for i in range(calls)],
    )


def test_stop_reasons_in_order_answer_budget_turns() -> None:
    assert _stop_reason(_out(0), 4, 4, 10**6, 9.0, 1, 0.1) is StopReason.ANSWERED
    assert _stop_reason(_out(1), 1, 4, 500, 0.0, 500, None) is StopReason.BUDGET
    assert _stop_reason(_out(1), 1, 4, 10, 0.02, None, 0.01) is StopReason.BUDGET
    assert _stop_reason(_out(1), 4, 4, 10, 0.0, 500, None) is StopReason.TURN_LIMIT
    assert _stop_reason(_out(2), 3, 4, 499, 0.0, 500, 1.0) is None


def test_tool_content_is_the_result_or_an_error_and_bounded() -> None:
    ok = ToolRun(call_id="c", tool="t", turn=1, ok=True, result={"id": "T-1"})
    assert json.loads(_tool_content(ok)) == {"id": "T-1"}
    bad = ToolRun(call_id="c", tool="t", turn=1, ok=False, error="tool_rejected: 400")
    assert json.loads(_tool_content(bad)) == {"error": "tool_rejected: 400"}
    big = ok.model_copy(update={"result": {"blob": "x" * (MAX_TOOL_RESULT_BYTES * 2)}})
    text = _tool_content(big)
    assert len(text.encode()) <= MAX_TOOL_RESULT_BYTES and "truncated" in json.loads(text)
