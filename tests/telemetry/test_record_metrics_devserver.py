"""Metrics after chaos scenarios: read from an in-memory reader and scraped over HTTP."""

from __future__ import annotations

import uuid
from collections import defaultdict

import httpx
import pytest

from agent_failover.cli.report_fetch import fetch_breakers
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.telemetry import names
from agent_failover.testing.harness import Harness
from agent_failover.testing.sim.admin import SimAdmin
from tests.telemetry.conftest import Captured
from tests.workflows.helpers import CallInput, ResilientCallWorkflow

pytestmark = pytest.mark.devserver
PRIMARY = "anthropic-us-east"


def points(captured: Captured) -> dict[str, list]:
    """Every data point the in-memory reader holds, by instrument name."""
    data = captured.reader.get_metrics_data()
    out: dict[str, list] = defaultdict(list)
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name].extend(m.data.data_points)
    return out


def _sum(pts: list, **attrs: object) -> float:
    return sum(p.value for p in pts if all(p.attributes.get(k) == v for k, v in attrs.items()))


async def test_failover_metrics_after_a_primary_outage(
    traced: Harness, sim_admin: SimAdmin, captured: Captured
) -> None:
    """Primary rejects our key (its breaker opens at once), two calls: attempts by outcome,
    a substitution tier 0 → 1 each time (failed, then skipped by the open breaker), answers
    by tier, cascade depth, the GenAI duration/tokens/TTFC, the breaker's transition and
    gauge."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "auth_error"}])
    outs = [await traced.call(max_tokens=80) for _ in range(2)]
    assert [o.tier for o in outs] == [1, 1]
    pts = points(captured)
    assert _sum(pts[names.ATTEMPTS], route=PRIMARY, outcome="auth") == 1
    assert _sum(pts[names.ATTEMPTS], outcome="ok") == 2
    assert _sum(pts[names.SUBSTITUTIONS], from_tier=0, to_tier=1, reason="auth") == 1
    assert _sum(pts[names.ANSWERS], role="plain", tier=1, capability="full") == 2
    depth = [p for p in pts[names.CASCADE_DEPTH] if p.attributes["role"] == "plain"]
    assert sum(p.count for p in depth) == 2 and sum(p.sum for p in depth) == 3
    dur = pts[names.GEN_AI_CLIENT_OPERATION_DURATION]
    assert any(p.attributes.get(names.ERROR_TYPE) == "auth" for p in dur)
    ok = [p for p in dur if names.ERROR_TYPE not in p.attributes]
    assert sum(p.count for p in ok) == 2 and all(p.sum > 0 for p in ok)
    assert all(p.attributes[names.GEN_AI_OPERATION_NAME] == "chat" for p in dur)
    tokens = pts[names.GEN_AI_CLIENT_TOKEN_USAGE]
    assert {p.attributes[names.GEN_AI_TOKEN_TYPE] for p in tokens} == {"input", "output"}
    assert sum(p.count for p in pts[names.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK]) == 2
    assert _sum(pts[names.VALIDATIONS], result="pass") == 2
    assert _sum(pts[names.BREAKER_TRANSITIONS], route=PRIMARY, to="open") == 1
    assert _sum(pts[names.BREAKER_STATE], route=PRIMARY) == 2  # open


async def test_hedge_cache_and_static_metrics(
    traced: Harness, sim_admin: SimAdmin, captured: Captured
) -> None:
    """A hedge race counts fired/won/cancelled; with every route down afterwards the
    cached answer is served (its age recorded), and a new prompt gets the static one."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "slow_first_token", "seconds": 1.5}])
    request = ChatRequest(messages=[Message(role="user", content="cache me")], max_tokens=80)
    first = await traced.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role="hedged", request=request),
        id=f"call-{uuid.uuid4().hex[:10]}",
        task_queue=traced.task_queue,
        result_type=AgentOutput,
    )
    assert first.capability.value == "full"
    for route in traced.policy.endpoints:
        await sim_admin.set_faults(route, [{"kind": "auth_error"}])
    cached = await traced.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role="hedged", request=request),
        id=f"call-{uuid.uuid4().hex[:10]}",
        task_queue=traced.task_queue,
        result_type=AgentOutput,
    )
    static = await traced.call("hedged", max_tokens=80)
    assert cached.route != "static" and cached.tier == 3
    assert static.capability.value == "static"
    pts = points(captured)
    for kind in ("fired", "won", "cancelled"):
        assert _sum(pts[names.HEDGES], role="hedged", event=kind) == 1, kind
    assert sum(p.count for p in pts[names.CACHE_AGE]) == 1
    assert _sum(pts[names.CACHE_LOOKUPS], hit=True) == 1
    assert _sum(pts[names.ANSWERS], role="hedged", capability="static") == 1
    assert _sum(pts[names.SUBSTITUTIONS], to_tier=3) == 2


async def test_prometheus_endpoint_serves_the_series_over_http(
    traced: Harness, sim_admin: SimAdmin, captured: Captured
) -> None:
    """The worker's scrape endpoint (127.0.0.1, a free port) serves our series and the
    GenAI ones in Prometheus' text format after a failover."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "auth_error"}])
    await traced.call(max_tokens=80)
    port = captured.telemetry.metrics_port
    assert port
    async with httpx.AsyncClient() as http:
        resp = await http.get(f"http://127.0.0.1:{port}/metrics")
    assert resp.status_code == 200
    text = resp.text
    for series in (
        "failover_attempts_total",
        "failover_substitutions_total",
        "failover_answers_total",
        "failover_cascade_depth_bucket",
        "failover_breaker_state",
        "failover_breaker_transitions_total",
        "gen_ai_client_operation_duration_seconds_bucket",
        "gen_ai_client_token_usage_bucket",
        "gen_ai_client_operation_time_to_first_chunk_seconds_bucket",
    ):
        assert f"\n{series}{{" in text, series
    assert 'failover_route="' not in text and f'route="{PRIMARY}"' in text
    # `failover report --metrics-url` reads the breaker states from the same endpoint
    breakers = {r[0]: r[1] for r in await fetch_breakers(f"http://127.0.0.1:{port}/metrics")}
    assert breakers[PRIMARY] == "open"
