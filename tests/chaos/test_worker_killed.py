"""Chaos: the worker dies mid-pipeline and a new one (new objects, same task queue, same
stores) takes over. Temporal resumes the run; no step is lost or recorded twice."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from agent_failover.testing.sim.admin import SimAdmin
from tests.chaos.conftest import build_worker
from tests.chaos.helpers import (
    PRIMARY,
    assert_conduct,
    assert_consistent,
    eventually,
    results_of,
    start_pipeline,
    wait_until_steps,
)
from tests.workflows.conftest import running

pytestmark = [pytest.mark.chaos, pytest.mark.devserver]


async def test_pipeline_survives_its_worker_being_killed(
    dev_env, policy, sim_admin: SimAdmin
) -> None:
    """Kill every worker task while specialists are in flight; a fresh worker finishes."""
    # Slow but inside the 2 s first-token budget: every step spends ~1 s on the wire.
    await sim_admin.set_faults(PRIMARY, [{"kind": "latency", "seconds": 1.0}])
    old, old_workers = build_worker(dev_env.client, policy)
    tasks = [asyncio.create_task(w.run()) for w in old_workers]
    handles = [await start_pipeline(old, f"killed worker task {i}") for i in range(3)]
    await wait_until_steps(handles[0], 1)

    # ...and a specialist call is on the wire (the primary holds it for a second)
    async def on_the_wire() -> bool:
        return len(await sim_admin.attempts()) > len(handles)

    await eventually(on_the_wire)
    # Abrupt: cancel the run tasks (no graceful period, in-flight activities are cut).
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    killed_at = len(await sim_admin.attempts())

    new, new_workers = build_worker(
        dev_env.client,
        policy,
        task_queue=old.task_queue,
        health=old.health,
        cache=old.cache,
    )
    assert new.activities is not old.activities
    async with running(new_workers):
        results = await results_of(handles, timeout_s=25)
    for r in results:
        assert_consistent(r)
        # every planned specialist answered exactly once per round
        per_role = Counter(s.step.split("#")[0] for s in r.steps if "#" in s.step)
        rounds = per_role["critic"]
        for p in r.plan:
            assert per_role[p["role"]] == rounds * sum(q["role"] == p["role"] for q in r.plan)
    seen = await sim_admin.attempts()
    assert len(seen) > killed_at, "the new worker made no calls: nothing was resumed"
    assert any(a.outcome == "client_disconnected" for a in seen[:killed_at]), "nothing was cut"
    assert_conduct(results, seen)
