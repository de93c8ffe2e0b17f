"""``agent_failover.saga.Saga`` in a user workflow (time-skipping server): compensations run in
reverse, each with its own retry policy; one that still fails is never dropped (the run
ends ``COMPENSATION_FAILED`` with the list, the others still ran); cancellation and the
query work."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.saga import CompensationLog, CompensationStatus
    from agent_failover.saga import Saga, idempotency_key
    from agent_failover.workflows.saga import COMPENSATION_FAILED

#: What the activities did, in order (in-process worker, so tests read it directly).
EVENTS: list[str] = []
#: Compensations that fail this many more times before succeeding ("x" -> n).
FLAKY: dict[str, int] = {}


class SagaInput(BaseModel):
    effects: list[str]
    fail_after: bool = True  # raise after the effects (else wait to be cancelled)
    undo_attempts: int = 3


@activity.defn
async def do(name: str) -> str:
    EVENTS.append(f"do {name}")
    return f"id-{name}"


@activity.defn
async def undo(name: str) -> None:
    if FLAKY.get(name, 0) > 0:
        FLAKY[name] -= 1
        EVENTS.append(f"undo-failed {name}")
        raise ApplicationError(f"cannot undo {name} yet", type="undo_unavailable")
    EVENTS.append(f"undo {name}")


@workflow.defn(sandboxed=False)
class SagaUserWorkflow:
    @workflow.run
    async def run(self, inp: SagaInput) -> str:
        saga = Saga()
        saga.attach_query()
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=1), maximum_attempts=inp.undo_attempts
        )
        async with saga:
            for name in inp.effects:
                key = saga.key(name, "do", {"name": name})
                ref = await workflow.execute_activity(
                    do, name, start_to_close_timeout=timedelta(seconds=10)
                )
                saga.add(
                    undo,
                    name,
                    step=name,
                    tool="do",
                    args={"name": name},
                    result={"id": ref},
                    retry_policy=retry,
                )
                assert saga.log.entries[-1].effect.idempotency_key == key
            if inp.fail_after:
                raise ApplicationError(
                    "the last step failed", type="step_failed", non_retryable=True
                )
            await workflow.sleep(timedelta(hours=1))
        return "done"


@pytest.fixture
async def worker(ts_env: WorkflowEnvironment):
    EVENTS.clear()
    FLAKY.clear()
    tq = f"saga-{uuid.uuid4().hex[:8]}"
    async with Worker(
        ts_env.client, task_queue=tq, workflows=[SagaUserWorkflow], activities=[do, undo]
    ):
        yield ts_env.client, tq


async def _run(worker, inp: SagaInput) -> tuple[BaseException, CompensationLog]:
    client, tq = worker
    handle = await client.start_workflow(
        SagaUserWorkflow.run, inp, id=f"saga-{uuid.uuid4().hex[:8]}", task_queue=tq
    )
    with pytest.raises(WorkflowFailureError) as err:
        await handle.result()
    log = await handle.query("compensation_log", result_type=CompensationLog)
    return err.value.cause, log


async def test_failure_compensates_in_reverse_and_reraises(worker) -> None:
    cause, log = await _run(worker, SagaInput(effects=["a", "b", "c"]))
    assert isinstance(cause, ApplicationError) and cause.type == "step_failed"
    assert EVENTS == ["do a", "do b", "do c", "undo c", "undo b", "undo a"]
    assert [e.status for e in log.entries] == [CompensationStatus.COMPENSATED] * 3


async def test_each_compensation_retries_with_its_own_policy(worker) -> None:
    FLAKY["b"] = 2  # fails twice, the third attempt (of 3) succeeds
    cause, log = await _run(worker, SagaInput(effects=["a", "b"]))
    assert cause.type == "step_failed"
    assert EVENTS[2:] == ["undo-failed b", "undo-failed b", "undo b", "undo a"]
    assert all(e.status is CompensationStatus.COMPENSATED for e in log.entries)


async def test_a_compensation_that_still_fails_escalates_and_the_rest_run(worker) -> None:
    FLAKY["b"] = 99
    cause, log = await _run(worker, SagaInput(effects=["a", "b", "c"], undo_attempts=2))
    assert isinstance(cause, ApplicationError) and cause.type == COMPENSATION_FAILED
    assert EVENTS[3:] == ["undo c", "undo-failed b", "undo-failed b", "undo a"]
    [failed] = cause.details[0]
    assert failed["effect"]["step"] == "b" and failed["status"] == "failed"
    assert "undo_unavailable" in failed["error"]
    assert [e.status.value for e in log.entries] == ["compensated", "failed", "compensated"]


async def test_cancellation_compensates_then_the_run_ends_cancelled(worker) -> None:
    client, tq = worker
    handle = await client.start_workflow(
        SagaUserWorkflow.run,
        SagaInput(effects=["a", "b"], fail_after=False),
        id=f"saga-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
    )
    for _ in range(100):
        if EVENTS == ["do a", "do b"]:
            break
        await asyncio.sleep(0.05)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as err:
        await handle.result()
    assert isinstance(err.value.cause, CancelledError)
    assert EVENTS == ["do a", "do b", "undo b", "undo a"]


def test_idempotency_key_is_stable_and_argument_sensitive() -> None:
    k = idempotency_key("wf-1", "charge", "charge_card", {"amount": 5, "cur": "EUR"})
    assert k == idempotency_key("wf-1", "charge", "charge_card", {"cur": "EUR", "amount": 5})
    assert k != idempotency_key("wf-1", "charge", "charge_card", {"amount": 6, "cur": "EUR"})
    assert k != idempotency_key("wf-2", "charge", "charge_card", {"amount": 5, "cur": "EUR"})


async def test_a_bug_in_workflow_code_does_not_compensate(monkeypatch) -> None:
    """A TypeError is retried by Temporal as a task failure: undoing for it would leave
    compensations in history that fixed code would not replay."""
    from agent_failover.resilience.saga import SideEffect

    saga = Saga()
    saga.log.append(SideEffect(step="a", tool="do", idempotency_key="k", compensation_tool="u"))
    saga._undo["k"] = object()  # registered (the activity itself is not called here)
    calls: list[str] = []

    async def fake_compensate() -> list:
        calls.append("compensate")
        return []

    monkeypatch.setattr(saga, "compensate", fake_compensate)
    assert await saga.__aexit__(TypeError, TypeError("bug"), None) is False
    assert calls == []
    err = ApplicationError("failed", type="x")
    assert await saga.__aexit__(ApplicationError, err, None) is False
    assert calls == ["compensate"]
