"""The admin API through SimAdmin: faults, scenarios, the attempts log, reset, the CLI."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from agent_failover.testing.sim.faults import Fault, FaultKind
from tests.sim.simtest_helpers import anthropic_body, anthropic_url, openai_body, openai_url

ROOT = Path(__file__).resolve().parents[2]


async def test_endpoints_lists_base_urls_and_active_faults(sim):
    """GET /_admin/endpoints reports every endpoint with its SDK base URL and faults."""
    async with sim.admin() as admin:
        await admin.set_faults("openai-us", [Fault(kind=FaultKind.SERVER_ERROR)])
        eps = {e["name"]: e for e in await admin.endpoints()}
    assert set(eps) == set(sim.config.endpoint_names)
    assert eps["openai-us"]["base_url"] == sim.base_url("openai-us")
    assert eps["openai-us"]["base_url"].endswith("/openai-us/v1")
    assert [f["kind"] for f in eps["openai-us"]["active_faults"]] == ["server_error"]
    assert eps["gemini-flash"]["active_faults"] == []


async def test_set_and_clear_faults(sim, http):
    """Faults set through the admin API apply at once and clear per endpoint or globally."""
    async with sim.admin() as admin:
        await admin.set_faults("openai-us", [{"kind": "unavailable"}])
        await admin.set_faults("anthropic-us-east", [{"kind": "overloaded"}])
        assert (await http.post(openai_url(sim), json=openai_body())).status_code == 503
        await admin.clear("openai-us")
        assert (await http.post(openai_url(sim), json=openai_body())).status_code == 200
        assert (await http.post(anthropic_url(sim), json=anthropic_body())).status_code == 529
        await admin.clear()
        assert (await http.post(anthropic_url(sim), json=anthropic_body())).status_code == 200


async def test_post_accepts_single_fault_and_wrapped_list(sim, http):
    """POST takes a bare fault object or {"faults": [...]} as well as a list."""
    url = f"{sim.url}/_admin/faults/openai-us"
    assert (await http.post(url, json={"kind": "server_error"})).status_code == 200
    r = await http.post(url, json={"faults": [{"kind": "rate_limit", "retry_after": 1}]})
    assert r.json()["faults"][0]["kind"] == "rate_limit"


async def test_invalid_fault_and_unknown_endpoint_are_refused(sim, http):
    """A bad fault gets a 400 naming the field; an unknown endpoint a 404."""
    r = await http.put(f"{sim.url}/_admin/faults/openai-us", json=[{"kind": "latency"}])
    assert r.status_code == 400 and "seconds" in r.text
    r = await http.put(f"{sim.url}/_admin/faults/nowhere", json=[])
    assert r.status_code == 404
    async with sim.admin() as admin:
        with pytest.raises(httpx.HTTPStatusError, match="400"):
            await admin.set_faults("openai-us", [{"kind": "bogus"}])


async def test_attempts_log_records_every_attempt_and_filters(sim, http):
    """Attempts carry seq, endpoint, model, arrival, stream, faults, outcome, status, tokens."""
    async with sim.admin() as admin:
        await admin.set_faults("openai-us", [{"kind": "rate_limit"}])
        await http.post(anthropic_url(sim), json=anthropic_body(stream=True))
        mark = sim.state.clock.now()
        await http.post(openai_url(sim), json=openai_body())
        rows = await admin.attempts()
        assert [r.seq for r in rows] == [1, 2]
        first, second = rows
        assert (first.endpoint, first.model, first.stream, first.outcome, first.status) == (
            "anthropic-us-east",
            "claude-sonnet-4-5",
            True,
            "ok",
            200,
        )
        assert first.tokens_sent > 0 and first.duration_s > 0 and first.input_tokens > 0
        assert (second.outcome, second.status, second.faults) == ("error", 429, ["rate_limit"])
        assert second.arrival >= first.arrival
        assert second["endpoint"] == "openai-us"  # rows also read like dicts
        assert [r.seq for r in await admin.attempts(endpoint="openai-us")] == [2]
        assert [r.seq for r in await admin.attempts(since=mark)] == [2]
        assert [r.seq for r in await admin.attempts(after_seq=1)] == [2]
        await admin.clear_attempts()
        assert await admin.attempts() == []


async def test_models_list_is_not_an_attempt(sim, http):
    """Listing models does not count as a completion attempt."""
    await http.get(f"{sim.base_url('openai-us')}/models")
    async with sim.admin() as admin:
        assert await admin.attempts() == []


async def test_reset_restores_start_state(sim, http):
    """POST /_admin/reset clears faults, scenario and the log."""
    async with sim.admin() as admin:
        await admin.set_faults("openai-us", [{"kind": "server_error"}])
        await admin.load_scenario(ROOT / "testing" / "sim" / "scenarios" / "outage_demo.yaml")
        await http.post(openai_url(sim), json=openai_body())
        await admin.reset()
        assert await admin.attempts() == []
        assert (await admin.scenario_status()) == {"scenario": None}
        assert (await http.post(openai_url(sim), json=openai_body())).status_code == 200


async def test_scenario_over_admin_api_with_fake_clock(fake_sim, http):
    """A timeline loaded over HTTP turns faults on and off as the fake clock advances."""
    clock = fake_sim.state.clock
    async with fake_sim.admin() as admin:
        status = await admin.load_scenario(
            {
                "name": "blip",
                "events": [
                    {"from": "10s", "to": "20s", "endpoint": "anthropic-us-east", "answers": 529},
                    {"from": "15s", "organisation": "openai", "faults": [{"kind": "server_error"}]},
                ],
            }
        )
        assert status["name"] == "blip" and status["active_events"] == []

        async def codes() -> tuple[int, int]:
            a = await http.post(anthropic_url(fake_sim), json=anthropic_body())
            o = await http.post(openai_url(fake_sim), json=openai_body())
            return a.status_code, o.status_code

        assert await codes() == (200, 200)
        clock.set(clock.now() + 12 - (clock.now() - status["loaded_at"]))
        assert await codes() == (529, 200)
        clock.advance(4)
        assert await codes() == (529, 500)
        assert (await admin.scenario_status())["active_events"] == [0, 1]
        clock.advance(10)
        assert await codes() == (200, 500)
        await admin.clear_scenario()
        assert await codes() == (200, 200)


async def test_scenario_yaml_body_and_validation_errors(sim, http):
    """The scenario endpoint takes YAML too and answers 400 with the failing field."""
    yaml_body = "name: y\nevents:\n  - {from: 0s, endpoint: cheap-mini, answers: 503}\n"
    r = await http.post(
        f"{sim.url}/_admin/scenario",
        content=yaml_body,
        headers={"content-type": "application/yaml"},
    )
    assert r.status_code == 200 and r.json()["active_events"] == [0]
    r = await http.post(f"{sim.url}/_admin/scenario", json={"events": [{"from": "soon"}]})
    assert r.status_code == 400
    r = await http.post(
        f"{sim.url}/_admin/scenario", json={"events": [{"endpoint": "nowhere", "answers": 500}]}
    )
    assert r.status_code == 400 and "nowhere" in r.text


async def test_cli_serves_and_stops_on_sigterm():
    """`python -m sim --port 0` announces its URL, serves, and exits cleanly on SIGTERM."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_failover.testing.sim",
        "--port",
        "0",
        "--scenario",
        str(ROOT / "testing" / "sim" / "scenarios" / "latency_ramp.yaml"),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode()
        url = line.split(" on ")[1].split()[0]
        async with httpx.AsyncClient() as client:
            scenario = (await client.get(f"{url}/_admin/scenario")).json()
        assert scenario["name"] == "latency_ramp"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 10)
    assert code == 0
