"""Chaos: a scripted fault timeline (latency ramp, sudden 529 spike, slow recovery) loaded
into the simulator while pipelines run concurrently through every phase of it."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent_failover.resilience.contracts import BreakerState
from agent_failover.testing.sim.admin import SimAdmin
from tests.chaos.conftest import build_worker
from tests.chaos.helpers import (
    PRIMARY,
    assert_conduct,
    assert_consistent,
    results_of,
    start_pipeline,
)
from tests.workflows.conftest import running

pytestmark = [pytest.mark.chaos, pytest.mark.devserver]

SPIKE_START_S, SPIKE_END_S = 3.0, 6.0
#: Seconds after load: the primary's latency ramps up, then it and the other-provider
#: standby answer 529, then the primary comes back slow (and briefly still shedding).
TIMELINE = {
    "name": "chaos_ramp_spike_recover",
    "events": [
        {
            "from": 0,
            "to": SPIKE_START_S,
            "endpoint": PRIMARY,
            "faults": [
                {"kind": "lognormal_latency", "median_s": 0.05, "sigma": 0.3, "ramp_to": 1.2}
            ],
        },
        {"from": SPIKE_START_S, "to": SPIKE_END_S, "endpoint": PRIMARY, "answers": 529},
        {"from": 3.5, "to": 5.5, "endpoint": "openai-us", "answers": 529},
        {
            "from": SPIKE_END_S,
            "to": 30,
            "endpoint": PRIMARY,
            "faults": [{"kind": "lognormal_latency", "median_s": 0.3, "sigma": 0.3}],
        },
        {
            "from": SPIKE_END_S,
            "to": 8,
            "endpoint": PRIMARY,
            "faults": [{"kind": "overloaded", "probability": 0.2}],
        },
    ],
}
#: When each pipeline starts (seconds after load): ramp, spike, early recovery, healthy.
WAVES = [0.0, 0.0, 1.5, 3.2, 3.8, 4.5, 6.2, 8.0]


async def test_pipelines_ride_out_a_ramp_a_spike_and_recovery(
    dev_env, policy, sim_admin: SimAdmin
) -> None:
    """Every pipeline ends with an answer; none fails; the spike trips the primary's
    breaker instead of being hammered, and the primary serves again once it half-opens.

    No health monitor runs here, so real calls must be the half-open trials: the policy
    opts in with ``half_open_call_fraction: 1`` (the default 0 leaves trials to probes).
    """
    breaker = policy.breaker.model_copy(update={"half_open_call_fraction": 1.0})
    policy = policy.model_copy(update={"breaker": breaker})
    h, workers = build_worker(dev_env.client, policy)
    async with running(workers):
        await sim_admin.load_scenario(TIMELINE)
        loaded = (await sim_admin.scenario_status())["loaded_at"]
        t0 = time.monotonic()
        handles = []
        for i, at in enumerate(WAVES):
            await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
            handles.append(await start_pipeline(h, f"chaos timeline task {i}"))
        results = await results_of(handles, timeout_s=20)
        # Recovery: once the open duration lapses, traffic itself trials the primary.
        b = await h.health.breaker(PRIMARY)
        if b.state is BreakerState.OPEN and b.open_until is not None:
            await asyncio.sleep(min(10.0, max(0.0, b.open_until - time.time() + 0.3)))
        late = await results_of(
            [await start_pipeline(h, f"chaos recovery task {i}") for i in range(2)], timeout_s=10
        )
    for r in [*results, *late]:
        assert_consistent(r)
        assert r.escalation.value == "none", "tier 1/2 stayed up: nothing should escalate"
    seen = await sim_admin.attempts()
    assert_conduct([*results, *late], seen)
    spiked = [a for a in seen if a.endpoint == PRIMARY and a.status == 529]
    assert spiked, "no pipeline ran during the 529 spike"
    skips = [
        a
        for r in results
        for s in r.steps
        for a in s.output.attempts
        if a.route == PRIMARY and a.outcome == "skipped" and "open breaker" in (a.note or "")
    ]
    assert skips, "the spike never tripped the primary's breaker"
    # Not hammered: the breaker trips within its minimum sample, not after every call.
    assert len(spiked) <= policy.breaker_for(PRIMARY).min_calls, len(spiked)
    assert any(s.output.tier >= 1 for r in results for s in r.steps)
    # Recovery: after the spike the primary answered again, and served the late pipelines.
    assert any(
        a.endpoint == PRIMARY and a.status == 200 and a.arrival > loaded + SPIKE_END_S for a in seen
    )
    assert any(s.output.route == PRIMARY for r in late for s in r.steps)
