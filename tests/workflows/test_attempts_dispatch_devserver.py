"""Bulkhead isolation in both dispatch modes, on the dev server against the simulator.

``queue``: each bulkhead's model calls run on its own task queue and worker slots.
``eager``: they run on the workflow's own queue (Temporal hands them to the worker with the
workflow task's completion) and a semaphore per bulkhead bounds them inside the worker; an
attempt that finds its bulkhead full goes to the bulkhead's queue and waits there. Either
way a saturated bulkhead keeps its slot limit and does not delay another bulkhead's calls.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.plugin import FailoverPlugin, llm_task_queue
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.options import CallOptions, RosterOverride
from agent_failover.testing.sim.admin import SimAdmin
from tests.workflows.conftest import Harness, make_harness, running
from tests.workflows.helpers import attempt_activities

pytestmark = pytest.mark.devserver

PRIMARY, SLOW = "anthropic-us-east", "cheap-mini"
SLOTS = {"core": 2, "specialists": 2}
#: Held first token of the slow route (under the role's 2 s TTFT budget: each call answers).
HOLD_S = 1.2
SLOW_CALLS = 6


async def _call(h: Harness, role: str, wf_id: str, options: CallOptions | None = None):
    return await h.call(
        role, f"bulkhead {uuid.uuid4().hex[:6]}", options=options, max_tokens=120, workflow_id=wf_id
    )


async def _queues(h: Harness, wf_id: str) -> list[str]:
    """Task queue of every activity that ran a model attempt, in order."""
    history = await h.client.get_workflow_handle(wf_id).fetch_history()
    return [queue for _, queue in attempt_activities(history)]


def _max_in_flight(attempts: list[dict]) -> int:
    edges = sorted(
        [(a["arrival"], 1) for a in attempts]
        + [(a["arrival"] + (a["duration_s"] or 0.0), -1) for a in attempts]
    )
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


@pytest.mark.parametrize("dispatch", ["eager", "queue"])
async def test_a_saturated_bulkhead_keeps_its_limit_and_starves_no_other(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin, dispatch: str
) -> None:
    """Six slow calls in `specialists` (2 slots) run two at a time, while a `core` call
    (`plain` in `core`) answers from the primary before they are through."""
    plain = policy.role("plain")
    core_role = plain.model_copy(update={"name": "plain-core", "bulkhead": "core"})
    policy = policy.model_copy(update={"roles": {**policy.roles, "plain-core": core_role}})
    h, workers = await make_harness(dev_env.client, policy, dispatch=dispatch, bulkhead_slots=SLOTS)
    await sim_admin.set_faults(SLOW, [{"kind": "slow_first_token", "seconds": HOLD_S}])
    slow_opts = CallOptions(roster=RosterOverride(tier0=[SLOW]))
    slow_ids = [f"slow-{uuid.uuid4().hex[:8]}" for _ in range(SLOW_CALLS)]
    core_id = f"core-{uuid.uuid4().hex[:8]}"
    async with running(workers):
        t0 = time.monotonic()
        slow = [asyncio.create_task(_call(h, "plain", i, slow_opts)) for i in slow_ids]
        await asyncio.sleep(0.3)
        core = await _call(h, "plain-core", core_id)
        slow_done_when_core_answered = sum(t.done() for t in slow)
        outs = await asyncio.gather(*slow)
        slow_wall = time.monotonic() - t0
        queues = {i: await _queues(h, i) for i in [*slow_ids, core_id]}
    assert core.route == PRIMARY and core.tier == 0
    assert slow_done_when_core_answered < SLOW_CALLS
    assert all(o.route == SLOW for o in outs), [(o.route, o.reason_codes) for o in outs]
    attempts = await sim_admin.attempts(endpoint=SLOW)
    assert len(attempts) == SLOW_CALLS
    assert _max_in_flight(attempts) <= SLOTS["specialists"]
    # Two at a time: three waves of held first tokens at least.
    assert slow_wall >= 3 * HOLD_S
    spec_q = llm_task_queue(h.task_queue, "specialists")
    if dispatch == "queue":
        assert queues[core_id] == [llm_task_queue(h.task_queue, "core")]
        assert all(queues[i] == [spec_q] for i in slow_ids)
    else:
        # The core call ran on the workflow's own queue (eagerly); slow calls beyond the
        # bulkhead's two slots were refused there and sent to the bulkhead's queue.
        assert queues[core_id] == [h.task_queue]
        assert all(queues[i] in ([h.task_queue], [h.task_queue, spec_q]) for i in slow_ids)
        assert sum(queues[i] == [h.task_queue, spec_q] for i in slow_ids) >= 1


def test_dispatch_defaults_to_eager_only_when_every_bulkhead_runs_beside_the_worker(
    policy: PolicyConfig,
) -> None:
    """eager with all bulkheads local; queue when another process serves some of them."""
    assert FailoverPlugin(policy, stores="memory").dispatch == "eager"
    assert FailoverPlugin(policy, stores="memory", bulkheads=()).dispatch == "queue"
    assert FailoverPlugin(policy, stores="memory", bulkheads=["core"]).dispatch == "queue"
    assert FailoverPlugin(policy, stores="memory", dispatch="queue").dispatch == "queue"
    with pytest.raises(ValueError, match="dispatch must be"):
        FailoverPlugin(policy, stores="memory", dispatch="fast")  # type: ignore[arg-type]
