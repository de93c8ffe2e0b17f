"""``Saga`` with effects whose activity failed after the effect may have been applied
(time-skipping server): a timeout or retries exhausted logs the effect ``maybe_applied``
and the rollback undoes it by its idempotency key; a non-retryable validation error is
not logged; an undo that finds nothing counts as ``compensated (nothing applied)``."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.saga import CompensationLog, CompensationStatus
    from agent_failover.saga import Saga
    from agent_failover.workflows.saga import maybe_applied_failure

#: Effects in place, by idempotency key (in-process worker: tests read it directly).
APPLIED: dict[str, str] = {}
EVENTS: list[str] = []


class Effect(BaseModel):
    key: str
    mode: str  # ok | apply_then_hang | reject | fail_before


class MaybeInput(BaseModel):
    modes: list[str]


@activity.defn
async def apply_effect(eff: Effect) -> str:
    if eff.mode == "reject":
        raise ApplicationError("title is required", type="validation", non_retryable=True)
    if eff.mode == "fail_before":
        raise ApplicationError("server busy", type="busy")  # retryable, nothing applied
    APPLIED[eff.key] = "open"
    EVENTS.append(f"apply {eff.mode}")
    if eff.mode == "apply_then_hang":
        await asyncio.sleep(3)  # the start-to-close timeout (1 s) fires first
    return eff.key


@activity.defn
async def undo_effect(key: str) -> dict:
    """The contract: keyed by the effect's key, idempotent, "not found" is a success."""
    if APPLIED.get(key) != "open":
        EVENTS.append("undo nothing")
        return {"nothing_applied": True}
    APPLIED[key] = "undone"
    EVENTS.append("undo")
    return {"undone": key}


@workflow.defn(sandboxed=False)
class MaybeAppliedWorkflow:
    @workflow.run
    async def run(self, inp: MaybeInput) -> str:
        saga = Saga()
        saga.attach_query()
        async with saga:
            for i, mode in enumerate(inp.modes):
                step = f"s{i}"
                key = saga.key(step, "apply_effect", {"mode": mode})
                try:
                    await workflow.execute_activity(
                        apply_effect,
                        Effect(key=key, mode=mode),
                        start_to_close_timeout=timedelta(seconds=1),
                        retry_policy=RetryPolicy(
                            initial_interval=timedelta(milliseconds=100), maximum_attempts=2
                        ),
                    )
                except ActivityError as exc:
                    if maybe_applied_failure(exc):
                        saga.add(undo_effect, key, step=step, key=key, maybe_applied=True)
                    continue
                saga.add(undo_effect, key, step=step, key=key)
            raise ApplicationError("a later step failed", type="step_failed", non_retryable=True)


@pytest.fixture
async def worker(ts_env: WorkflowEnvironment):
    APPLIED.clear()
    EVENTS.clear()
    tq = f"maybe-{uuid.uuid4().hex[:8]}"
    async with Worker(
        ts_env.client,
        task_queue=tq,
        workflows=[MaybeAppliedWorkflow],
        activities=[apply_effect, undo_effect],
    ):
        yield ts_env.client, tq


async def _run(worker, *modes: str) -> CompensationLog:
    client, tq = worker
    handle = await client.start_workflow(
        MaybeAppliedWorkflow.run,
        MaybeInput(modes=list(modes)),
        id=f"maybe-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
    )
    with pytest.raises(WorkflowFailureError) as err:
        await handle.result()
    assert isinstance(err.value.cause, ApplicationError)
    assert err.value.cause.type == "step_failed"
    return await handle.query("compensation_log", result_type=CompensationLog)


async def test_effect_applied_then_timed_out_is_rolled_back(worker) -> None:
    log = await _run(worker, "ok", "apply_then_hang")
    assert [e.maybe_applied for e in log.entries] == [False, True]
    assert [e.label() for e in log.entries] == ["compensated", "compensated"]
    assert set(APPLIED.values()) == {"undone"} and len(APPLIED) == 1 + 1
    assert EVENTS.count("undo") == 2


async def test_validation_error_is_not_registered(worker) -> None:
    log = await _run(worker, "ok", "reject")
    assert [e.effect.step for e in log.entries] == ["s0"]
    assert EVENTS == ["apply ok", "undo"]


async def test_undo_of_a_never_applied_effect_counts_as_nothing_applied(worker) -> None:
    log = await _run(worker, "fail_before")
    [entry] = log.entries
    assert entry.maybe_applied and entry.status is CompensationStatus.COMPENSATED
    assert entry.nothing_applied and entry.label() == "compensated (nothing applied)"
    assert APPLIED == {} and EVENTS == ["undo nothing"]
