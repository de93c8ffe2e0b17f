"""The escalation desk on the time-skipping server: steps blocked at different moments join
one escalation, one decision answers them all, and the timeout runs from when it opened."""

from __future__ import annotations

import asyncio
import uuid

from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agent_failover.resilience.contracts import AgentOutput, Capability
from agent_failover.testing.harness import running
from agent_failover.workflows.escalation import EscalationDesk
from agent_failover.workflows.models import (
    BlockedStep,
    EscalationAction,
    EscalationDecision,
    PendingEscalation,
)

TIMEOUT_S = 3600.0


def _snapshot(blocked: list[BlockedStep]) -> PendingEscalation:
    out = AgentOutput(role="r", content="", capability=Capability.STATIC, tier=3, confidence=0.2)
    return PendingEscalation(
        step=blocked[0].step,
        role="r",
        reason=blocked[0].reason,
        output=out,
        completed_steps=[],
        pending_steps=[],
        failover_history={},
        blocked_steps=blocked,
    )


@workflow.defn(name="DeskProbe")
class DeskProbe:
    """Three steps block 0, 1 and 2 s apart and wait on the desk; returns what each got."""

    def __init__(self) -> None:
        self.desk = EscalationDesk(_snapshot, lambda: None)

    @workflow.run
    async def run(self, steps: int) -> list[str]:
        async def step(i: int) -> str:
            await workflow.sleep(i)
            blocked = BlockedStep(step=f"s{i}", role="r", trigger="static_fallback", reason="x")
            decision = await self.desk.wait(blocked, TIMEOUT_S)
            return decision.action.value if decision else "timed_out"

        got = await asyncio.gather(*(step(i) for i in range(steps)))
        return [*got, f"rounds={self.desk.rounds}"]

    @workflow.signal(name="resolve")
    def resolve(self, decision: EscalationDecision) -> None:
        self.desk.resolve(decision)

    @workflow.query(name="blocked")
    def blocked(self) -> list[str]:
        pending = self.desk.pending
        return [b.step for b in pending.blocked_steps] if pending else []


async def _start(env: WorkflowEnvironment, tq: str):
    return await env.client.start_workflow(
        DeskProbe.run, 3, id=f"desk-{uuid.uuid4().hex[:8]}", task_queue=tq
    )


def _worker(env: WorkflowEnvironment, tq: str) -> Worker:
    return Worker(
        env.client,
        task_queue=tq,
        workflows=[DeskProbe],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )


async def test_one_decision_answers_every_step_that_joined(ts_env: WorkflowEnvironment) -> None:
    """Steps blocked at t=0, 1, 2 s are all listed on one escalation; one accept frees all."""
    tq = f"desk-{uuid.uuid4().hex[:8]}"
    async with running([_worker(ts_env, tq)]):
        handle = await _start(ts_env, tq)
        await ts_env.sleep(5)
        assert await handle.query(DeskProbe.blocked) == ["s0", "s1", "s2"]
        await handle.signal(
            DeskProbe.resolve, EscalationDecision(action=EscalationAction.ACCEPT_DEGRADED)
        )
        assert await handle.result() == ["accept_degraded"] * 3 + ["rounds=1"]


async def test_the_timeout_runs_from_when_the_escalation_opened(
    ts_env: WorkflowEnvironment,
) -> None:
    """Nobody answers: every step times out together, one timeout after the first blocked."""
    tq = f"desk-{uuid.uuid4().hex[:8]}"
    async with running([_worker(ts_env, tq)]):
        handle = await _start(ts_env, tq)
        assert await handle.result() == ["timed_out"] * 3 + ["rounds=1"]
        desc = await handle.describe()
    assert desc.close_time is not None
    elapsed = (desc.close_time - desc.start_time).total_seconds()
    assert TIMEOUT_S <= elapsed < TIMEOUT_S + 60
