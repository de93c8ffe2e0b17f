"""Shadow evaluation on the dev server against the simulator's golden-set accuracy.

The simulator answers ``Reply with exactly: TOKEN`` right with each endpoint's accuracy,
and with ``accuracy_under_load`` while more than ``load_threshold`` requests are in flight
on it: a model that answers fast but badly when busy. Shadow evaluation must catch that
endpoint (QUALITY_REGRESSION in the store, then demoted by the planner), leave a healthy
one alone, sample the configured share of calls, and never hold up the caller.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig, ShadowSettings
from agent_failover.resilience.contracts import AgentOutput, ReasonCode
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.plan import RequestFacts, SkipReason
from agent_failover.resilience.planner import plan
from agent_failover.testing.harness import Harness, build_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.shadow import shadow_task_queue
from tests.workflows.helpers import CallInput, ResilientCallWorkflow

pytestmark = pytest.mark.devserver

PRIMARY, HEALTHY, REFERENCE, STANDBY = (
    "anthropic-us-east",
    "anthropic-eu-west",
    "openai-us",
    "bedrock-us-west-2",
)
CONCURRENT = 10
LOAD_THRESHOLD = 2


def _shadowed(policy: PolicyConfig, *, fraction: float = 1.0) -> PolicyConfig:
    """``plain`` (primary PRIMARY) and ``plain-eu`` (primary HEALTHY), both shadowed on
    REFERENCE for every ``fraction`` of calls."""
    shadow = ShadowSettings(
        reference_route=REFERENCE,
        sample_fraction=fraction,
        tolerance=0.3,
        window_s=600.0,
        min_samples=4,
        restore_after=3,
        timeout_s=10.0,
    )
    plain = policy.role("plain").model_copy(update={"shadow": shadow})
    roster = plain.roster.model_copy(
        update={"tier0": [HEALTHY], "tier1": [STANDBY, "openai-us"], "tier2": ["cheap-mini"]}
    )
    eu = plain.model_copy(update={"name": "plain-eu", "roster": roster})
    return policy.model_copy(update={"roles": {**policy.roles, "plain": plain, "plain-eu": eu}})


def _golden(i: int) -> ChatRequest:
    return ChatRequest(
        messages=[
            Message(role="user", content=f"Reply with exactly: TOKEN-{uuid.uuid4().hex[:6]}-{i}")
        ],
        max_tokens=40,
    )


async def _calls(h: Harness, role: str, n: int) -> list[AgentOutput]:
    return list(
        await asyncio.gather(
            *(
                h.client.execute_workflow(
                    ResilientCallWorkflow.run,
                    CallInput(role=role, request=_golden(i)),
                    id=f"shadow-{uuid.uuid4().hex[:10]}",
                    task_queue=h.task_queue,
                    result_type=AgentOutput,
                )
                for i in range(n)
            )
        )
    )


async def _samples(h: Harness, role: str, route: str, n: int, timeout_s: float = 30.0):
    """The route's quality state once it holds at least ``n`` samples."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = await h.health.quality(role, route)
        if len(state.samples) >= n or time.monotonic() > deadline:
            return state
        await asyncio.sleep(0.1)


@pytest.fixture
async def loaded(sim_admin: SimAdmin):
    """PRIMARY answers golden tasks wrong above LOAD_THRESHOLD in flight; HEALTHY and the
    reference always right; both primaries slow enough (0.5 s) that concurrent calls overlap."""
    await sim_admin.set_accuracy(
        PRIMARY, 1.0, accuracy_under_load=0.0, load_threshold=LOAD_THRESHOLD
    )
    await sim_admin.set_accuracy(HEALTHY, 1.0)
    await sim_admin.set_accuracy(REFERENCE, 1.0)
    for route in (PRIMARY, HEALTHY):
        await sim_admin.set_faults(route, [{"kind": "latency", "seconds": 0.5}])
    yield sim_admin


async def test_shadow_detects_the_endpoint_that_degrades_under_load(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, loaded: SimAdmin
) -> None:
    """Concurrent calls push PRIMARY over its load threshold: its answers disagree with the
    reference, the store marks it QUALITY_REGRESSION, the planner demotes it and the next
    call is served by a standby with that reason. HEALTHY, equally loaded, stays clean."""
    cfg = _shadowed(policy)
    h, workers = build_harness(dev_env.client, cfg)
    async with running(workers):
        outs = await asyncio.gather(
            _calls(h, "plain", CONCURRENT), _calls(h, "plain-eu", CONCURRENT)
        )
        assert {o.route for o in outs[0]} == {PRIMARY}
        assert {o.route for o in outs[1]} == {HEALTHY}
        bad = await _samples(h, "plain", PRIMARY, CONCURRENT)
        good = await _samples(h, "plain-eu", HEALTHY, CONCURRENT)
        assert len(bad.samples) >= CONCURRENT and len(good.samples) >= CONCURRENT
        assert bad.regressed and bad.delta is not None and bad.delta > 0.3
        assert not good.regressed and all(s.score == 1.0 for s in good.samples)
        snap = await h.health.snapshot(
            [PRIMARY, HEALTHY], now=time.time(), window_s=60, min_calls=1, role="plain"
        )
        assert snap.get(PRIMARY).quality_regressed and not snap.get(HEALTHY).quality_regressed
        p = plan(
            cfg.role("plain"),
            cfg,
            snap,
            RequestFacts(input_tokens=20, max_output_tokens=40),
            time.time(),
        )
        assert p.attempts[0].route != PRIMARY
        assert any(
            s.route == PRIMARY and s.code is SkipReason.QUALITY_REGRESSION for s in p.skipped
        )
        [after] = await _calls(h, "plain", 1)
        assert after.route != PRIMARY and after.tier == 1
        assert ReasonCode.QUALITY_REGRESSION in after.reason_codes


async def test_sampling_fraction_is_honoured(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """With sample_fraction 0.5, about half of 40 calls are re-run on the reference (each
    shadow run asks the reference once): neither none nor all."""
    cfg = _shadowed(policy, fraction=0.5)
    h, workers = build_harness(dev_env.client, cfg)
    n = 40
    async with running(workers):
        await _calls(h, "plain", n)
        recorded, shadowed = await _settled(h, sim_admin, PRIMARY)
    assert recorded == shadowed
    assert 10 <= shadowed <= 30, shadowed


async def _settled(
    h: Harness, sim_admin: SimAdmin, route: str, timeout_s: float = 30.0
) -> tuple[int, int]:
    """(samples recorded for ``route``, reference calls the simulator saw) once the shadow
    runs have settled: both equal and unchanged over half a second (a shadow run asks the
    reference before it records its sample, so on a busy machine the two differ for a
    while), or as they stand at the deadline."""
    deadline, last = time.monotonic() + timeout_s, (-1, -1)
    while True:
        state = await h.health.quality("plain", route)
        seen = Counter(a["endpoint"] for a in await sim_admin.attempts())[REFERENCE]
        now = (len(state.samples), seen)
        if (now == last and now[0] == now[1]) or time.monotonic() > deadline:
            return now
        last = now
        await asyncio.sleep(0.5)


async def test_shadow_never_blocks_the_call_without_a_shadow_worker(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """Nobody serves the shadow queue: the call still answers at once, and its shadow
    evaluation waits as an abandoned child on the shadow queue (nothing was recorded)."""
    cfg = _shadowed(policy)
    h, workers = build_harness(dev_env.client, cfg, shadow=False)
    wf_id = f"shadow-{uuid.uuid4().hex[:10]}"
    async with running(workers):
        t0 = time.monotonic()
        out = await h.client.execute_workflow(
            ResilientCallWorkflow.run,
            CallInput(role="plain", request=_golden(0)),
            id=wf_id,
            task_queue=h.task_queue,
            result_type=AgentOutput,
        )
        elapsed = time.monotonic() - t0
    assert out.route == PRIMARY and elapsed < 10.0
    history = await h.client.get_workflow_handle(wf_id).fetch_history()
    started = [
        e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
        for e in history.events
        if e.HasField("child_workflow_execution_started_event_attributes")
    ]
    assert len(started) == 1
    child = await h.client.get_workflow_handle(started[0]).describe()
    assert child.status == WorkflowExecutionStatus.RUNNING
    assert child.task_queue == shadow_task_queue(h.task_queue)
    assert (await h.health.quality("plain", PRIMARY)).samples == []
    assert REFERENCE not in {a["endpoint"] for a in await sim_admin.attempts()}
    await h.client.get_workflow_handle(started[0]).terminate("test done")
