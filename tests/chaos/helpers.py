"""Shared moves and checks of the chaos tests: start pipelines, wait for them with a
bound, and assert the invariants every chaos run must keep (an answer or an explicit
escalation, a consistent step list, conduct the policy allows)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from temporalio.client import WorkflowHandle

from agent_failover.testing.sim.admin import AttemptInfo
from agent_failover.workflows.attempts import SAME_ROUTE_ATTEMPTS
from agent_failover.workflows.models import (
    EscalationState,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
    PipelineStatus,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.shipped import ALL_ENDPOINTS
from tests.workflows.conftest import Harness

ENDPOINTS = ALL_ENDPOINTS
PRIMARY = "anthropic-us-east"
#: Attempt outcomes that never reached a provider. A breaker rejection is not among them:
#: it may be Temporal's same-route retry, rejected after the first try did go out.
NOT_SENT = {"skipped", "miss"}
#: Escalation states a finished pipeline may report: none needed, or made explicitly.
EXPLICIT_END = {EscalationState.NONE, EscalationState.TIMED_OUT, EscalationState.RESOLVED}


async def start_pipeline(h: Harness, task: str, **opts: object) -> WorkflowHandle:
    """Start one pipeline on the harness's task queue (the options bound escalation waits)."""
    opts.setdefault("escalation_timeout_s", 2.0)
    # Chaos runs must each end with an answer: nobody answers their escalations, so the
    # timeout accepts degraded (the default, fail, is covered in the time-skipping tests).
    opts.setdefault("escalation_timeout_action", "accept_degraded")
    return await h.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task=task, options=PipelineOptions(**opts)),
        id=f"chaos-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=PipelineResult,
    )


#: Where a chaos test that fails leaves the histories of its runs, for the replayer.
HISTORY_DUMP_DIR = Path(tempfile.gettempdir()) / "agent-failover-chaos-histories"


async def results_of(handles: Iterable[WorkflowHandle], timeout_s: float) -> list[PipelineResult]:
    """Every handle's result; any failed pipeline or the deadline fails the test.

    On failure the runs' histories are written to :data:`HISTORY_DUMP_DIR` (named in the
    error) so a rare failure can be replayed and examined afterwards."""
    handles = list(handles)
    try:
        return list(
            await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout_s)
        )
    except Exception as exc:
        paths = await dump_histories(handles)
        msg = f"chaos runs did not all finish ({exc!r}); histories: {paths}"
        raise AssertionError(msg) from exc


async def dump_histories(handles: Iterable[WorkflowHandle]) -> list[str]:
    """Write each run's history as JSON under :data:`HISTORY_DUMP_DIR`; the paths written."""
    HISTORY_DUMP_DIR.mkdir(parents=True, exist_ok=True)
    paths = []
    for h in handles:
        with contextlib.suppress(Exception):  # best effort: the server may be gone too
            history = await h.fetch_history()
            path = HISTORY_DUMP_DIR / f"{h.id}.json"
            path.write_text(history.to_json())
            paths.append(str(path))
    return paths


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout_s: float = 10.0, every_s: float = 0.05
) -> None:
    """Poll ``check`` until it holds; the deadline (not a sleep length) bounds the wait.

    Chaos tests observe other processes (a dev server, a simulator, Redis) that offer no
    event to await, so polling is the only way to see a state change."""
    async with asyncio.timeout(timeout_s):
        while not await check():  # noqa: ASYNC110 - see docstring
            await asyncio.sleep(every_s)


async def wait_until_steps(handle: WorkflowHandle, n: int, timeout_s: float = 15.0) -> None:
    """Wait until ``n`` steps of the pipeline are done (the run is demonstrably mid-way)."""

    async def done() -> bool:
        with contextlib.suppress(Exception):  # not yet picked up by a worker
            st: PipelineStatus = await handle.query(
                AgentPipelineWorkflow.status, result_type=PipelineStatus
            )
            return len(st.completed_steps) >= n
        return False

    await eventually(done, timeout_s)


def assert_consistent(result: PipelineResult) -> None:
    """An answer, an explicit end state, and every stage's step recorded exactly once."""
    assert result.answer.strip(), "a pipeline ended without an answer"
    assert result.escalation in EXPLICIT_END, result.escalation
    names = [s.step for s in result.steps]
    assert len(names) == len(set(names)), f"duplicated steps: {names}"
    assert names[0] == "planner" and names[-1] == "synthesis", names
    critics = [n for n in names if n.startswith("critic#")]
    assert critics == [f"critic#{i + 1}" for i in range(len(critics))] and critics, names
    specialists = [f"{p['role']}#{i + 1}" for i, p in enumerate(result.plan)]
    expected = set(specialists)
    for k in range(1, len(critics)):  # each revision round re-ran every specialist once
        expected |= {f"{s}/rev{k if k > 1 else ''}" for s in specialists}
    assert set(names) - {"planner", "synthesis", *critics} == expected, names
    assert len(result.sections) == len(result.plan)
    assert {s.step for s in result.sections} <= set(names)


def sent_attempts(results: Iterable[PipelineResult]) -> Counter[str]:
    """Attempts the workflows made per route (records that reached the wire).

    Also asserts that no single call tried a route twice: a failed route is excluded
    for the rest of the call, so failover never loops back to it."""
    per_route: Counter[str] = Counter()
    for r in results:
        for step in r.steps:
            sent = [
                a.route
                for a in step.output.attempts
                if a.outcome not in NOT_SENT and a.route != "cache"
            ]
            dup = [route for route, n in Counter(sent).items() if n > 1]
            assert not dup, f"step {step.step} tried {dup} more than once"
            per_route.update(sent)
    return per_route


def assert_conduct(results: list[PipelineResult], seen: list[AttemptInfo]) -> Counter[str]:
    """The simulator saw no more attempts per route than the workflows' records allow.

    Each recorded attempt is one activity that Temporal may run at most
    SAME_ROUTE_ATTEMPTS times; anything beyond that is a hidden retry layer."""
    planned = sent_attempts(results)
    got = Counter(a.endpoint for a in seen)
    for route, n in got.items():
        assert n <= SAME_ROUTE_ATTEMPTS * planned[route], (route, n, planned[route])
    return got
