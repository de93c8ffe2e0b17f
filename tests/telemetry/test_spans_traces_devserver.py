"""Traces of real failover runs: one trace per run, GenAI attempt spans, failover events."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from agent_failover.telemetry import names
from agent_failover.testing.harness import Harness
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import PipelineInput, PipelineResult
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.shipped import ALL_ENDPOINTS
from tests.telemetry.conftest import Captured

pytestmark = pytest.mark.devserver
PRIMARY = "anthropic-us-east"
ALL = ALL_ENDPOINTS


def _attempt_spans(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.attributes.get(names.GEN_AI_OPERATION_NAME) == "chat"]


def _events(spans: list[ReadableSpan], name: str) -> list[dict]:
    return [dict(e.attributes) for s in spans for e in s.events if e.name == name]


async def test_pipeline_failover_is_one_trace_with_genai_attempt_spans(
    traced: Harness, sim_admin: SimAdmin, captured: Captured
) -> None:
    """A pipeline whose primary is down: every span (client start, workflow, local
    activities, activities, attempts) shares one trace id, and each attempt is a
    ``chat {model}`` client span with the GenAI attributes and the failover ones."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    handle = await traced.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="Compare two queue designs"),
        id=f"pipe-{uuid.uuid4().hex[:10]}",
        task_queue=traced.task_queue,
        result_type=PipelineResult,
    )
    result = await handle.result()
    spans = list(captured.spans.get_finished_spans())
    assert len({s.context.trace_id for s in spans}) == 1, "one pipeline must be one trace"
    assert any(s.name.startswith("StartWorkflow:") for s in spans)
    assert any(s.name == "RunActivity:call_model" for s in spans)
    attempts = _attempt_spans(spans)
    assert len(attempts) == sum(
        1
        for st in result.steps
        for a in st.output.attempts
        if a.outcome not in ("skipped",) and a.route not in ("cache", "static")
    )
    failed = [s for s in attempts if s.attributes[names.ATTR_ROUTE] == PRIMARY]
    assert failed and all(s.attributes[names.ERROR_TYPE] == "overloaded" for s in failed)
    ok = [s for s in attempts if s.attributes[names.ATTR_OUTCOME] == "ok"]
    assert ok, "some attempt answered"
    for s in ok:
        assert s.name == f"chat {s.attributes[names.GEN_AI_REQUEST_MODEL]}"
        assert s.attributes[names.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
        assert s.attributes[names.GEN_AI_RESPONSE_MODEL]
        assert s.attributes[names.GEN_AI_PROVIDER_NAME]
        assert s.attributes[names.ATTR_TIER] in (0, 1, 2)
        assert names.ERROR_TYPE not in s.attributes
    # attempts hang under their call's span, and activities under their attempt
    by_id = {s.context.span_id: s for s in spans}
    for s in attempts:
        assert by_id[s.parent.span_id].name.startswith("invoke_agent ")
    subs = _events(spans, names.EV_SUBSTITUTION)
    assert subs and all(e["failover.from"] == PRIMARY for e in subs)
    assert all(e["failover.reason"] in ("overloaded", "breaker_open") for e in subs)
    assert all(e["failover.to"] != PRIMARY for e in subs)


async def test_hedge_events_fired_won_cancelled(
    traced: Harness, sim_admin: SimAdmin, captured: Captured
) -> None:
    """A slow primary on a hedged role: hedge fired on its span, the loser's span ends
    cancelled with its event, and the call's span says the hedge won."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "slow_first_token", "seconds": 1.5}])
    out = await traced.call("hedged", max_tokens=80)
    assert out.route != PRIMARY
    spans = list(captured.spans.get_finished_spans())
    assert _events(spans, names.EV_HEDGE_FIRED)
    assert _events(spans, names.EV_HEDGE_WON)
    cancelled = [
        s for s in _attempt_spans(spans) if s.attributes[names.ATTR_OUTCOME] == "cancelled"
    ]
    assert [s.attributes[names.ATTR_ROUTE] for s in cancelled] == [PRIMARY]
    assert any(e.name == names.EV_HEDGE_CANCELLED for e in cancelled[0].events)


async def test_every_route_down_serves_static_with_breaker_events(
    traced: Harness, sim_admin: SimAdmin, captured: Captured
) -> None:
    """Every live route rejects our key: the calls end on the static fallback
    (a substitution to ``static`` and a static-served event each), and the breakers'
    trips are span events of the attempts' activities."""
    for route in ALL:
        await sim_admin.set_faults(route, [{"kind": "auth_error"}])
    outs = [await traced.call(max_tokens=80) for _ in range(3)]
    assert all(o.capability.value in ("static", "degraded") for o in outs)
    spans = list(captured.spans.get_finished_spans())
    served = _events(spans, names.EV_STATIC_SERVED) + _events(spans, names.EV_CACHE_SERVED)
    assert len(served) == 3
    subs = _events(spans, names.EV_SUBSTITUTION)
    assert any(e["failover.to"] in ("static", "cache") for e in subs)
    trips = _events(spans, names.EV_BREAKER_TRANSITION)
    assert trips and all(e["failover.breaker.to"] == "open" for e in trips)
    assert all(e["failover.breaker.reason"] == "auth_failure" for e in trips)
