"""Shadow evaluation from workflow code: sample a call, hand it to the shadow queue, move on.

:func:`maybe_shadow` is called by ``resilient_complete`` after a live route answered. For a
role with ``shadow`` settings it draws the call's ticket from ``workflow.random()`` (replay
draws the same) and, for the sampled share, starts a :class:`ShadowEvaluationWorkflow`
child on ``<queue>-shadow`` with ``ParentClosePolicy.ABANDON`` and without awaiting even
its start: the caller's answer is returned at once, a parent that finishes first leaves the
evaluation running, and a shadow queue nobody serves only leaves the child waiting (bounded
by its execution timeout). A workflow awaits :func:`settle_shadows` before it returns (the
pipeline does), so its last sampled call is evaluated too. The child's outcome never
reaches the caller: shadow evaluation can demote a route for *later* calls, never change
this one.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.shadow import (
        MAX_SHADOW_TEXT_CHARS,
        ShadowActivities,
        ShadowInput,
        ShadowResult,
    )
    from agent_failover.resilience.config import RolePolicy
    from agent_failover.resilience.contracts import HealthSnapshot
    from agent_failover.resilience.limits import clip
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.shadow import is_sampled, shadow_targets

#: Suffix of the low-priority task queue shadow evaluations run on.
SHADOW_QUEUE_SUFFIX = "-shadow"
#: How long an unserved shadow evaluation may wait before it is dropped.
SHADOW_EXECUTION_TIMEOUT = timedelta(hours=1)
#: Slack beyond the calls' own timeouts for the activity (store writes, scoring).
SHADOW_ACTIVITY_GRACE = timedelta(seconds=10)


_STARTS_ATTR = "_agent_failover_shadow_starts"


def shadow_task_queue(base: str) -> str:
    """The low-priority task queue of shadow evaluations for the deployment ``base``."""
    return f"{base}{SHADOW_QUEUE_SUFFIX}"


@workflow.defn(name="ShadowEvaluationWorkflow")
class ShadowEvaluationWorkflow:
    """One shadow evaluation: a single ``shadow_evaluate`` activity on the shadow queue."""

    @workflow.run
    async def run(self, inp: ShadowInput) -> ShadowResult:
        # One attempt: a retry after samples were written would count them twice, and a
        # missed sample costs nothing but a little evidence.
        calls = len(inp.targets) * 2 + 1  # the reference, then each target and its judge
        per_call = timedelta(seconds=inp.timeout_s)
        return await workflow.execute_activity_method(
            ShadowActivities.shadow_evaluate,
            inp.model_copy(update={"now": workflow.now().timestamp()}),
            start_to_close_timeout=per_call * calls + SHADOW_ACTIVITY_GRACE,
            retry_policy=RetryPolicy(maximum_attempts=1),
            summary=f"shadow {inp.role}: {', '.join(inp.targets)} vs reference",
        )


def maybe_shadow(
    role: RolePolicy,
    request: ChatRequest,
    answered_by: str,
    answer: str,
    snapshot: HealthSnapshot,
) -> asyncio.Task[object] | None:
    """Start a shadow evaluation of this answer if the call is sampled (see module doc)."""
    shadow = role.shadow
    if shadow is None or shadow.sample_fraction <= 0.0:
        return None
    if not is_sampled(workflow.random().random(), shadow.sample_fraction):
        return None
    regressed = [r for r, h in snapshot.routes.items() if h.quality_regressed]
    targets = shadow_targets(answered_by, shadow.reference_route, regressed, role.roster.routes())
    if not targets:
        return None
    info = workflow.info()
    inp = ShadowInput(
        role=role.name,
        request=request,
        answered_by=answered_by,
        answer=clip(answer, MAX_SHADOW_TEXT_CHARS),
        targets=targets,
        now=workflow.now().timestamp(),
        timeout_s=shadow.timeout_s,
    )
    start = workflow.start_child_workflow(
        ShadowEvaluationWorkflow.run,
        inp,
        # Not derived from the parent's id: a replay under another id must issue the same
        # command (the parent is on the child's record anyway). uuid4 here replays exactly.
        id=f"shadow-{role.name}-{workflow.uuid4().hex}",
        task_queue=shadow_task_queue(info.task_queue),
        parent_close_policy=ParentClosePolicy.ABANDON,
        execution_timeout=SHADOW_EXECUTION_TIMEOUT,
        static_summary=f"shadow evaluation of {role.name} on {answered_by}",
    )
    task = asyncio.ensure_future(start)
    task.add_done_callback(_swallow)
    _starts().append(task)
    return task


async def settle_shadows() -> None:
    """Wait until every shadow evaluation this run started has been accepted by Temporal.

    Call it before a workflow returns: the server does not start a child whose parent
    closed before the child's start was recorded, so the last sampled call of a run would
    otherwise go unevaluated. Starts are usually long settled by then (this costs nothing);
    a failed start is ignored.
    """
    starts = _starts()
    if starts:
        await asyncio.gather(*starts, return_exceptions=True)
        starts.clear()


def _starts() -> list[asyncio.Task[object]]:
    # Kept on the workflow instance: one list per run, gone with it (module state would be
    # shared between runs on an unsandboxed worker).
    inst = workflow.instance()
    starts = getattr(inst, _STARTS_ATTR, None)
    if starts is None:
        starts = []
        setattr(inst, _STARTS_ATTR, starts)
    return starts


def _swallow(task: asyncio.Future[object]) -> None:
    """A shadow start that failed (e.g. an id clash) must not fail the caller."""
    if not task.cancelled():
        task.exception()
