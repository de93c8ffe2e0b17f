"""A call refused by a shared rate budget is counted in ``failover.rate_budget.refusals``
(scope, route, bulkhead, role) where ``call_model`` refuses it, and is a span event."""

from __future__ import annotations

import httpx
import pytest
import yaml
from opentelemetry import trace
from temporalio.exceptions import ApplicationError

from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.model_call import ModelCallActivities
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import parse_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.outcomes import RATE_BUDGET
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.telemetry import names
from tests.activities.test_model_call_rate_budget import ROLE, ROUTE, T0, _call, _reply
from tests.telemetry.conftest import Captured
from tests.telemetry.test_setup import _points


def budgeted() -> tuple[PolicyConfig, ModelCallActivities]:
    """The demo policy with one request a minute on ``ROUTE``, and a worker's activities
    on a memory store whose provider calls are answered in-process."""
    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    data["rate_budgets"] = {"endpoints": {ROUTE: {"requests_per_minute": 1}}}
    policy = parse_policy(data, env={})
    acts = LLMActivitySet(
        policy,
        httpx.AsyncClient(transport=httpx.MockTransport(_reply)),
        MemoryHealthStore(),
        MemoryResponseCache(),
        task_queue_for=lambda r: "q",
    ).calls
    return policy, acts


async def refuse_a_call(acts: ModelCallActivities) -> ApplicationError:
    """One call granted, the next refused by the endpoint's budget; returns the refusal."""
    assert (await acts.call_model(_call(T0))).reply.text == "ok"
    with pytest.raises(ApplicationError) as info:
        await acts.call_model(_call(T0 + 1))
    return info.value


async def test_a_refused_call_is_counted_with_its_scope_route_and_bulkhead(
    captured: Captured,
) -> None:
    """One request a minute on the endpoint: the second call is refused and counted once
    with the endpoint scope, the route and the role's bulkhead; the granted one is not."""
    policy, acts = budgeted()
    assert (await acts.call_model(_call(T0))).reply.text == "ok"
    assert names.RATE_BUDGET_REFUSALS not in _points(captured.reader)
    with trace.get_tracer("test").start_as_current_span("attempt"):
        with pytest.raises(ApplicationError) as info:
            await acts.call_model(_call(T0 + 1))
    assert info.value.type == RATE_BUDGET
    (point,) = _points(captured.reader)[names.RATE_BUDGET_REFUSALS]
    bulkhead = policy.role(ROLE).bulkhead
    assert point.value == 1
    assert dict(point.attributes) == {
        "scope": f"endpoint:{ROUTE}",
        "route": ROUTE,
        "bulkhead": bulkhead,
        "role": ROLE,
    }
    (span,) = [s for s in captured.spans.get_finished_spans() if s.name == "attempt"]
    assert [e.name for e in span.events] == [names.EV_RATE_BUDGET_REFUSED]
    assert span.events[0].attributes["failover.bulkhead"] == bulkhead
