"""The drill's moving parts: the fault transport, the simulator's per-request faults, the
open-loop runner with a small arm against the simulator, the table, the PNG, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agent_failover.cli.drill import draw_timelines, report_table
from agent_failover.cli.main import app
from agent_failover.resilience.endpoint import Prices
from agent_failover.resilience.models import ChatRequest
from agent_failover.testing.drill import DrillFile, Sample, summarise
from agent_failover.testing.drill_run import ArmResult, run_drill
from agent_failover.testing.fault_transport import FaultTransport
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.handler import FAULTS_HEADER
from agent_failover.testing.sim.scenario import Scenario
from agent_failover.testing.sim.server import RunningSimulator

PRIMARY, STANDBY = "anthropic-us-east", "anthropic-eu-west"
BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 8,
    "messages": [{"role": "user", "content": "hi"}],
}
SCENARIO = Scenario.model_validate(
    {
        "name": "t",
        "events": [
            {"from": 10, "to": 20, "endpoint": PRIMARY, "answers": 529},
            {
                "from": 0,
                "to": 100,
                "organisation": "openai",
                "faults": [{"kind": "latency", "seconds": 0.0, "ramp_to": 1.0}],
            },
        ],
    }
)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_fault_transport_follows_its_clock_not_the_wall() -> None:
    seen: list[httpx.Request] = []
    inner = httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(200, json={}))
    clock = _Clock()
    transport = FaultTransport(SCENARIO, clock=clock, inner=inner)
    async with httpx.AsyncClient(transport=transport) as http:
        with pytest.raises(RuntimeError, match=r"start\(at\)"):
            await http.post(f"http://sim/{PRIMARY}/v1/messages")
        transport.start(1000.0)
        for t in (5.0, 15.0, 25.0):
            clock.now = 1000.0 + t
            await http.post(f"http://sim/{PRIMARY}/v1/messages")
        clock.now = 1050.0
        await http.post("http://sim/openai-us/v1/chat/completions")
        await http.post("http://sim/not-an-endpoint/x")
    headers = [r.headers.get(FAULTS_HEADER) for r in seen]
    assert headers[0] is None and headers[2] is None and headers[4] is None
    assert json.loads(headers[1]) == [{"kind": "http_error", "status": 529, **_defaults()}]
    ramp = json.loads(headers[3])[0]
    assert ramp["kind"] == "latency" and ramp["seconds"] == pytest.approx(0.5)
    assert [(i.t, i.faults) for i in transport.injections][:3] == [
        (5.0, ()),
        (15.0, ("http_error",)),
        (25.0, ()),
    ]


def _defaults() -> dict:
    from agent_failover.testing.sim.faults import Fault

    full = Fault(kind="http_error", status=529).model_dump(mode="json", exclude_none=True)
    return {k: v for k, v in full.items() if k not in ("kind", "status")}


def test_fault_transport_rejects_a_timeline_naming_unknown_endpoints() -> None:
    bad = Scenario.model_validate(
        {"name": "b", "events": [{"from": 0, "to": 1, "endpoint": "nope", "answers": 500}]}
    )
    with pytest.raises(ValueError, match="unknown endpoint"):
        FaultTransport(bad)


async def test_simulator_injects_the_faults_a_request_carries(simulator: RunningSimulator) -> None:
    url = f"{simulator.url}/{PRIMARY}/v1/messages"
    async with httpx.AsyncClient() as http:
        ok = await http.post(url, json=BODY)
        hit = await http.post(
            url, json=BODY, headers={FAULTS_HEADER: json.dumps([{"kind": "overloaded"}])}
        )
        bad = await http.post(url, json=BODY, headers={FAULTS_HEADER: '[{"kind": "nope"}]'})
    assert ok.status_code == 200
    assert hit.status_code == 529 and hit.json()["error"]["type"] == "overloaded_error"
    assert bad.status_code == 400 and FAULTS_HEADER in bad.text


class _FallbackArm:
    """Primary, else the other region: a minimal resilient caller."""

    name = "fallback"
    background_calls = False

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.AsyncClient()

    async def call(self, index: int, request: ChatRequest) -> ArmResult:
        for tier, route in enumerate((PRIMARY, STANDBY)):
            resp = await self.http.post(f"{self.url}/{route}/v1/messages", json=BODY)
            if resp.status_code == 200:
                u = resp.json()["usage"]
                return ArmResult(
                    "answered", tier, route, tier + 1, u["input_tokens"], u["output_tokens"]
                )
        return ArmResult("failed", error="both down")


async def test_run_drill_open_loop_against_the_simulator(
    simulator: RunningSimulator, sim_admin: SimAdmin
) -> None:
    """A 0.6 s drill at 20 req/s: every request sampled on schedule, the outage window
    answered by the standby, the arrivals the simulator logged returned."""
    drill = DrillFile.model_validate(
        {
            "name": "tiny",
            "drill": {"rate_per_s": 20, "duration_s": 0.6, "primary": PRIMARY},
            "events": [{"from": 0.2, "to": 0.4, "endpoint": PRIMARY, "answers": 529}],
        }
    )
    arm = _FallbackArm(simulator.url)
    prices = {PRIMARY: Prices(input_per_mtok=3, output_per_mtok=15), STANDBY: Prices()}
    try:
        samples, arrivals = await run_drill(drill, arm, sim_admin, prices)
    finally:
        await arm.http.aclose()
    assert [s.index for s in samples] == list(range(12))
    assert all(s.outcome == "answered" for s in samples)
    assert [s.start_s for s in samples] == sorted(s.start_s for s in samples)
    assert samples[-1].start_s >= 11 / 20
    assert len(arrivals) == sum(s.attempts for s in samples)
    # Which requests met the outage is read on the simulator's clock (seconds after the
    # load), not from the samples' start_s: on a loaded machine a request reaches the
    # simulator tens of ms after it started, so a start just inside the window can arrive
    # after it. The rows come in arrival order, as ``arrivals`` does.
    rows = await sim_admin.attempts()
    assert len(rows) == len(arrivals)
    primary = [(at, row) for at, row in zip(arrivals, rows, strict=True) if row.endpoint == PRIMARY]
    refused = [(at, row) for at, row in primary if row.status == 529]
    assert refused, "the outage window (0.2-0.4 s) refused no request on the primary"
    # Refused only inside the window: arrived before it closed, answered after it opened.
    assert all(at < 0.4 and at + (row.duration_s or 0.0) >= 0.2 for at, row in refused)
    assert all(row.status == 200 for at, row in primary if at + (row.duration_s or 0.0) < 0.2)
    assert all(row.status == 200 for at, row in primary if at >= 0.4)
    # ... and every request the primary refused was answered by the standby, at no cost.
    by_standby = [s for s in samples if s.route == STANDBY]
    assert len(by_standby) == len(refused)
    assert all(s.attempts == 2 and s.cost_usd == 0.0 for s in by_standby)
    assert all(s.primary_cost_usd > 0 for s in samples)
    assert await sim_admin.scenario_status() == {"scenario": None}  # unloaded afterwards


def test_table_and_png_from_a_report(tmp_path: Path) -> None:
    drill = DrillFile.model_validate(
        {
            "name": "p",
            "drill": {"duration_s": 3},
            "events": [{"from": 1, "to": 2, "endpoint": PRIMARY, "answers": 529}],
        }
    )
    samples = [
        Sample(0, 0.5, 0.1, "answered", 0, PRIMARY, 1),
        Sample(1, 1.5, 0.3, "answered", 1, STANDBY, 2),
        Sample(2, 1.7, None, "failed", error="timeout"),
    ]
    rep = summarise(drill, samples, [0.5, 1.5, 1.6])
    table = report_table(rep, "t")
    assert [c.header for c in table.columns][:3] == ["phase", "requests", "success"]
    assert table.row_count == 4 and "detection 0.80 s" in str(table.caption)
    png = tmp_path / "t.png"
    draw_timelines({"a": (rep, samples), "b": (rep, samples)}, png, "t")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_drill_command_names_what_is_wrong_in_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\ndrill: {rate_per_s: -1}\nevents: [{from: 1, to: 2, endpoint: a, answers: 529}]\n"
    )
    result = CliRunner().invoke(app, ["drill", str(bad)])
    assert result.exit_code == 2
    assert "bad.yaml" in result.output and "rate_per_s" in result.output


def test_refused_attempts_are_not_upstream_calls() -> None:
    """An attempt the worker refused (open breaker, rate budget, full bulkhead) never left:
    only the calls a provider saw count towards amplification."""
    from agent_failover.resilience.contracts import AgentOutput, AttemptRecord, Capability
    from agent_failover.testing.drill_run import result_of

    def rec(route: str, outcome: str) -> AttemptRecord:
        return AttemptRecord(route=route, tier=0, started_at=0.0, outcome=outcome)

    refused = [
        rec("anthropic-us-east", o) for o in ("breaker_rejected", "rate_budget", "bulkhead_full")
    ]
    out = AgentOutput(
        role="plain",
        content="hi",
        capability=Capability.FULL,
        tier=1,
        route="openai-us",
        confidence=1.0,
        attempts=[*refused, rec("anthropic-us-east", "overloaded"), rec("openai-us", "ok")],
    )
    assert result_of(out).attempts == 2
