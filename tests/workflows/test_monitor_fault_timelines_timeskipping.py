"""Fault timelines on the time-skipping server: minutes of outage in seconds of test.

:class:`FaultTransport` plays a scenario on the activity's clock (the server's skipped
time), so a 30-minute outage with production probe intervals and a 20-minute latency
ramp run in seconds while every call and probe meets exactly the fault its workflow
time falls in.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.providers.client import build_http_client
from agent_failover.resilience.config import (
    DEFAULT_MAX_OPEN_DURATION_S,
    DEFAULT_OPEN_DURATION_S,
    DEFAULT_PROBE_INTERVAL_S,
    PolicyConfig,
)
from agent_failover.resilience.contracts import AgentOutput, ReasonCode
from agent_failover.testing.drill import load_drill
from agent_failover.testing.fault_transport import FaultTransport
from agent_failover.testing.harness import Harness, build_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.scenario import Scenario
from agent_failover.workflows.models import MonitorInput
from agent_failover.workflows.monitor import HealthMonitorWorkflow

PRIMARY = "anthropic-us-east"
OUTAGE_FROM, OUTAGE_TO = 60.0, 60.0 + 30 * 60  # a 30-minute outage after a healthy minute


@asynccontextmanager
async def timeline(
    env: WorkflowEnvironment, policy: PolicyConfig, scenario: dict
) -> AsyncIterator[tuple[Harness, FaultTransport, float]]:
    """A worker whose provider calls go through a FaultTransport started at env time now."""
    transport = FaultTransport(Scenario.model_validate(scenario))
    http = build_http_client(policy.endpoints.values(), transport=transport)
    h, workers = build_harness(env.client, policy, http=http)
    start = (await env.get_current_time()).timestamp()
    transport.start(start)
    try:
        async with running(workers):
            yield h, transport, start
    finally:
        await http.aclose()


async def _offset(env: WorkflowEnvironment, start: float) -> float:
    return (await env.get_current_time()).timestamp() - start


def _production(policy: PolicyConfig) -> PolicyConfig:
    """The demo policy with the code's production breaker and probe defaults."""
    breaker = policy.breaker.model_copy(
        update={
            "open_duration_s": DEFAULT_OPEN_DURATION_S,
            "max_open_duration_s": DEFAULT_MAX_OPEN_DURATION_S,
        }
    )
    probes = policy.probes.model_copy(update={"interval_s": DEFAULT_PROBE_INTERVAL_S})
    return policy.model_copy(update={"breaker": breaker, "probes": probes})


async def test_thirty_minute_outage_with_production_probe_interval(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """Every call is answered; during the outage none by the primary; probes keep running
    on the 10 s grid and only meet the 529 inside the outage; after it the primary is
    back within the longest open duration plus two probe intervals."""
    policy = _production(policy)
    scenario = {
        "name": "outage_30m",
        "events": [{"from": OUTAGE_FROM, "to": OUTAGE_TO, "endpoint": PRIMARY, "answers": 529}],
    }
    async with timeline(ts_env, policy, scenario) as (h, transport, start):
        monitor = await h.client.start_workflow(
            HealthMonitorWorkflow.run,
            MonitorInput(routes=[PRIMARY], interval_s=DEFAULT_PROBE_INTERVAL_S),
            id=f"ts-monitor-{uuid.uuid4().hex[:8]}",
            task_queue=h.task_queue,
        )
        answers: list[tuple[float, AgentOutput]] = []
        while (t := await _offset(ts_env, start)) < OUTAGE_TO + 600:
            answers.append((t, await h.call("plain", env=ts_env)))
            await ts_env.sleep(150)
        await monitor.terminate()
    assert answers[0][1].route == PRIMARY  # healthy minute
    during = [out for t, out in answers if OUTAGE_FROM + 1 <= t < OUTAGE_TO]
    assert len(during) >= 10
    assert all(out.route != PRIMARY and out.tier >= 1 for out in during)
    on_primary = [i for i in transport.injections if i.endpoint == PRIMARY]
    assert all(("http_error" in i.faults) == (OUTAGE_FROM <= i.t < OUTAGE_TO) for i in on_primary)
    probes_in_outage = [i for i in on_primary if OUTAGE_FROM <= i.t < OUTAGE_TO]
    # Probes keep coming through half an hour of outage, never faster than the interval
    # (at most one per round, plus the calls' own first tries).
    assert len(during) + 1800 / DEFAULT_PROBE_INTERVAL_S >= len(probes_in_outage) >= 6
    back = [t for t, out in answers if t >= OUTAGE_TO and out.route == PRIMARY]
    assert back, "the primary never came back after the outage"
    assert back[0] - OUTAGE_TO <= DEFAULT_MAX_OPEN_DURATION_S + 2 * DEFAULT_PROBE_INTERVAL_S + 150
    assert all(out.route == PRIMARY for t, out in answers if t >= back[0])


async def test_twenty_minute_latency_ramp_demotes_the_primary_past_its_sla(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """The primary's latency grows 0 -> 500 ms over 20 workflow minutes; with a 250 ms
    p95 line over a 4-minute window it serves while well under the line and is demoted
    (SLA_DEMOTED, a standby answers) as the ramp approaches it, before the ramp ends."""
    plain = policy.role("plain")
    sla = plain.sla.model_copy(
        update={"p95_ms": 250.0, "p99_ms": 500.0, "window_s": 240.0, "min_samples": 5}
    )
    role = plain.model_copy(update={"name": "ramp", "sla": sla})
    policy = policy.model_copy(update={"roles": {**policy.roles, "ramp": role}})
    scenario = {
        "name": "latency_ramp_20m",
        "events": [
            {
                "from": 0,
                "to": 1200,
                "endpoint": PRIMARY,
                "faults": [{"kind": "latency", "seconds": 0.0, "ramp_to": 0.5}],
            }
        ],
    }
    async with timeline(ts_env, policy, scenario) as (h, _transport, start):
        answers: list[tuple[float, AgentOutput]] = []
        while (t := await _offset(ts_env, start)) < 1200:
            answers.append((t, await h.call("ramp", env=ts_env)))
            await ts_env.sleep(40)
    # Under 100 ms of injected latency (t < 240 s) the p95 stays under the line (the
    # measured latency adds the simulator's base latency and the worker's overhead).
    assert all(out.route == PRIMARY for t, out in answers if t < 240)
    demoted = [
        t
        for t, out in answers
        if out.route != PRIMARY and ReasonCode.SLA_DEMOTED in out.reason_codes
    ]
    assert demoted, "the primary was never demoted while its latency crossed the SLA"
    # Injected latency alone crosses the line at t = 600 s; demotion follows the ramp's
    # workflow time (a wall-clock timeline would not have moved in these few seconds).
    assert 240 <= demoted[0] < 1200


SHIPPED = Path(__file__).resolve().parents[2] / "bench" / "scenarios"


@pytest.mark.parametrize(
    "name", ["hard_primary_outage", "primary_flapping", "rate_limit_storm", "provider_outage"]
)
async def test_shipped_drill_timelines_at_production_defaults(
    ts_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin, name: str
) -> None:
    """The drill files, stretched x10 (minutes of faults), at the production probe
    interval and breaker durations: every call answered, none inside a fault window by a
    route the timeline has down, and the transport injected faults exactly in the windows.
    (``slow_first_token`` is left out: its 5 s first token is real time.)"""
    drill = load_drill(SHIPPED / f"{name}.yaml").scaled(10)
    windows = [(e.start_s, e.end_s or 0.0) for e in drill.scenario.events]
    down = {PRIMARY} | ({"anthropic-eu-west"} if name == "provider_outage" else set())
    policy = _production(policy)
    scenario = drill.scenario.model_dump(mode="json", by_alias=True, exclude_none=True)
    async with timeline(ts_env, policy, scenario) as (h, transport, start):
        monitor = await h.client.start_workflow(
            HealthMonitorWorkflow.run,
            MonitorInput(routes=sorted(down), interval_s=DEFAULT_PROBE_INTERVAL_S),
            id=f"ts-monitor-{uuid.uuid4().hex[:8]}",
            task_queue=h.task_queue,
        )
        answers: list[tuple[float, AgentOutput]] = []
        while (t := await _offset(ts_env, start)) < drill.drill.duration_s:
            answers.append((t, await h.call("plain", env=ts_env)))
            await ts_env.sleep(30)
        await monitor.terminate()

    def faulty(t: float) -> bool:
        return any(a <= t < b for a, b in windows)

    assert len(answers) >= 15 and all(out.tier <= 2 for _, out in answers)
    assert answers[0][1].route == PRIMARY
    inside = [out for t, out in answers if faulty(t) and faulty(t + 1)]
    assert inside and all(out.route not in down for out in inside)
    seen = [i for i in transport.injections if i.endpoint == PRIMARY]
    assert seen and all(bool(i.faults) == faulty(i.t) for i in seen)
