"""PipelineResult.bounded: a result always fits one Temporal payload; small ones are untouched."""

from __future__ import annotations

from agent_failover.resilience.contracts import AgentOutput, Capability
from agent_failover.resilience.limits import MAX_RESULT_BYTES
from agent_failover.resilience.pipeline import FailoverSummary
from agent_failover.workflows.models import TRIMMED_PREVIEW_CHARS, PipelineResult, StepResult


def _result(step_chars: int, steps: int = 20) -> PipelineResult:
    outs = [
        StepResult(
            step=f"analyst#{i}",
            output=AgentOutput(
                role="analyst",
                content="y" * step_chars,
                data={"text": "z" * step_chars},
                capability=Capability.FULL,
                tier=0,
                confidence=1.0,
            ),
        )
        for i in range(steps)
    ]
    return PipelineResult(
        answer="final answer",
        confidence=0.9,
        degraded=False,
        sections=[],
        steps=outs,
        summary=FailoverSummary(),
    )


def test_small_result_is_unchanged() -> None:
    """A normal result comes back as it was (nothing trimmed)."""
    r = _result(100)
    assert r.bounded() is r


def test_big_result_is_trimmed_to_fit_with_the_answer_kept() -> None:
    """Twenty step outputs of 2 x 200 kB shrink to previews until the result fits."""
    r = _result(200_000).bounded()
    assert len(r.model_dump_json()) <= MAX_RESULT_BYTES
    assert r.answer == "final answer" and r.trimmed_steps
    cut = next(s for s in r.steps if s.step == r.trimmed_steps[0]).output
    assert len(cut.content) <= TRIMMED_PREVIEW_CHARS and cut.data is None
