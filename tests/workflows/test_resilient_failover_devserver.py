"""Failover conduct on the dev server against the simulator on a real socket.

Each test injects one fault, runs one resilient call through a real Temporal worker,
and asserts both what the caller got and what the simulator saw (attempt counts per
route, gaps, no hammering of a failed route).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.cachekey import cache_key
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode
from agent_failover.resilience.models import ChatRequest, FinishReason, Message, ToolSpec
from agent_failover.resilience.options import CallOptions, RosterOverride
from agent_failover.testing.sim.admin import SimAdmin
from tests.workflows.conftest import Harness, make_harness, running
from tests.workflows.helpers import CallInput, ResilientCallWorkflow

pytestmark = pytest.mark.devserver

PRIMARY, OTHER_REGION, OTHER_PROVIDER, CHEAP, LARGE = (
    "anthropic-us-east",
    "anthropic-eu-west",
    "openai-us",
    "cheap-mini",
    "gemini-flash",
)
#: The primary's model on other clouds' regional endpoints, first in tier 1.
BEDROCK, VERTEX = "bedrock-us-west-2", "vertex-europe-west1"


def _request(text: str = "Summarize the failover design", max_tokens: int = 120) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=text)], max_tokens=max_tokens)


async def _call(
    h: Harness,
    role: str = "plain",
    request: ChatRequest | None = None,
    options: CallOptions | None = None,
):
    t0 = time.monotonic()
    out = await h.call(role, request or _request(f"task {uuid.uuid4().hex[:6]}"), options=options)
    return out, time.monotonic() - t0


async def _per_route(admin: SimAdmin) -> Counter[str]:
    return Counter(a["endpoint"] for a in await admin.attempts())


async def test_healthy_call_is_served_by_primary(harness: Harness, sim_admin: SimAdmin) -> None:
    """No fault: one attempt on tier 0, full capability, model and usage of that route."""
    out, _ = await _call(harness)
    assert out.capability is Capability.FULL and out.tier == 0
    assert out.route == PRIMARY and out.model == "claude-sonnet-4-5"
    assert out.usage.output_tokens > 0 and out.content.strip()
    assert await _per_route(sim_admin) == Counter({PRIMARY: 1})


async def test_healthy_call_caches_without_a_second_activity(harness: Harness) -> None:
    """A full answer is cached by the attempt itself: the history schedules exactly one
    activity (the first attempt's, which read the role context and ran the attempt), no
    cache_store, and the cache holds the answer."""
    req = _request("cache me from inside the attempt")
    wf_id = f"call-{uuid.uuid4().hex[:10]}"
    out: AgentOutput = await harness.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role="plain", request=req),
        id=wf_id,
        task_queue=harness.task_queue,
        result_type=AgentOutput,
    )
    assert out.tier == 0
    history = await harness.client.get_workflow_handle(wf_id).fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert scheduled == ["first_call"]
    system = harness.policy.role("plain").system_prompt
    keyed = req.model_copy(update={"system": system})  # the workflow adds the role's prompt
    hit = await harness.cache.get(cache_key("plain", keyed), now=time.time() + 1)
    assert hit is not None and hit.content == out.content and hit.route == PRIMARY


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ({"kind": "stream_cut", "after_tokens": 5}, ReasonCode.STREAM_INTERRUPTED),
        ({"kind": "stream_stall", "after_tokens": 5, "seconds": 30}, ReasonCode.STREAM_INTERRUPTED),
        ({"kind": "stream_error_event", "after_tokens": 3}, ReasonCode.STREAM_INTERRUPTED),
        ({"kind": "slow_first_token", "seconds": 30}, ReasonCode.LATENCY_BUDGET_EXCEEDED),
        ({"kind": "hang"}, ReasonCode.LATENCY_BUDGET_EXCEEDED),
        ({"kind": "overloaded"}, ReasonCode.MODEL_UNAVAILABLE),
        ({"kind": "connection_reset"}, ReasonCode.MODEL_UNAVAILABLE),
        ({"kind": "empty_output"}, ReasonCode.SEMANTIC_FAILURE),
    ],
    ids=lambda v: v["kind"] if isinstance(v, dict) else v.value,
)
async def test_primary_fault_fails_over_to_the_best_standby(
    harness: Harness, sim_admin: SimAdmin, fault: dict, reason: ReasonCode
) -> None:
    """A failing primary is tried once, then the best-scored tier-1 standby answers, complete.

    Both tier-1 routes are healthy, so the weighted score's cost term ranks the cheaper
    openai-us first."""
    await sim_admin.set_faults(PRIMARY, [fault])
    out, waited = await _call(harness)
    assert out.route == OTHER_PROVIDER and out.tier == 1
    assert out.capability is Capability.FULL
    assert reason in out.reason_codes
    assert ReasonCode.STANDBY_ROUTE in out.reason_codes
    # the failed attempt is in the history with its class, the answer is not truncated
    assert [a.route for a in out.attempts if a.outcome not in ("ok", "skipped")] == [PRIMARY]
    assert out.content.strip() and out.usage.output_tokens > 0
    seen = await _per_route(sim_admin)
    assert seen[PRIMARY] == 1, "a failed primary must not be retried blindly"
    assert seen[OTHER_PROVIDER] == 1 and seen[OTHER_REGION] == 0
    # budgets bound the wait: ttft 2 s / idle 3 s in the demo policy, plus overheads
    assert waited < 10, f"caller waited {waited:.1f}s"


async def test_single_malformed_chunk_is_skipped_not_failed(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """One bad SSE event is skipped and counted; the primary's reply is still used."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "malformed_chunk", "after_tokens": 3}])
    out, _ = await _call(harness)
    assert out.route == PRIMARY and out.tier == 0
    assert await _per_route(sim_admin) == Counter({PRIMARY: 1})


async def test_primary_region_down_goes_to_the_same_model_on_another_cloud(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """us-east overloaded while openai-us is throttled: Claude on Bedrock us-west-2 answers,
    before the other Anthropic region (the demo lists the cloud standbys first)."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    await sim_admin.set_faults(OTHER_PROVIDER, [{"kind": "rate_limit", "retry_after": 30}])
    out, _ = await _call(harness)
    assert out.route == BEDROCK and out.tier == 1
    assert out.model == "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    seen = await _per_route(sim_admin)
    assert seen[PRIMARY] == 1 and seen[OTHER_PROVIDER] == 1 and seen[BEDROCK] == 1
    assert seen[OTHER_REGION] == 0 and seen[VERTEX] == 0


async def test_region_down_on_bedrock_too_goes_to_vertex(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """With Bedrock's us-west-2 throttling as well, the same model on Vertex answers."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    await sim_admin.set_faults(OTHER_PROVIDER, [{"kind": "rate_limit", "retry_after": 30}])
    await sim_admin.set_faults(BEDROCK, [{"kind": "rate_limit", "retry_after": 30}])
    out, _ = await _call(harness)
    assert out.route == VERTEX and out.tier == 1 and out.model == "claude-sonnet-4-5@20250929"
    assert ReasonCode.RATE_LIMITED in out.reason_codes
    seen = await _per_route(sim_admin)
    assert seen[BEDROCK] == 1 and seen[VERTEX] == 1 and seen[OTHER_REGION] == 0


async def test_missing_done_is_finalized_promptly(harness: Harness, sim_admin: SimAdmin) -> None:
    """OpenAI terminal chunk without [DONE]: the reply is final at once, not after idle."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    await sim_admin.set_faults(OTHER_PROVIDER, [{"kind": "no_done"}])
    out, waited = await _call(harness)
    assert out.route == OTHER_PROVIDER
    assert waited < 3.0, f"waited {waited:.1f}s for a stream whose terminal chunk had arrived"


async def test_rate_limit_with_retry_after_cools_the_route(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """429 + Retry-After: fail over now, and the route is not called again before it lapses."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "rate_limit", "retry_after": 60}])
    out1, _ = await _call(harness)
    out2, _ = await _call(harness)
    assert out1.route == OTHER_PROVIDER and ReasonCode.RATE_LIMITED in out1.reason_codes
    assert out2.route == OTHER_PROVIDER
    skipped = [a for a in out2.attempts if a.route == PRIMARY]
    assert skipped and all(a.outcome == "skipped" for a in skipped)
    assert (await _per_route(sim_admin))[PRIMARY] == 1


async def test_context_length_goes_to_a_larger_window(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A context-length rejection skips same-size windows and lands on the largest one."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "context_length"}])
    out, _ = await _call(harness)
    assert out.route == LARGE
    assert ReasonCode.CONTEXT_TOO_LONG in out.reason_codes
    seen = await _per_route(sim_admin)
    assert seen[OTHER_REGION] == 0 and seen[OTHER_PROVIDER] == 0 and seen[CHEAP] == 0


async def test_content_filter_refusal_is_returned_by_default(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A refusal comes back typed (CONTENT_FILTERED, provider message); no other route is tried."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "content_filter"}])
    out, _ = await _call(harness)
    assert out.refused and out.route == PRIMARY and out.tier == 0
    assert out.refusal and "content" in out.refusal.lower()
    assert out.finish_reason is FinishReason.CONTENT_FILTER and out.content == ""
    assert ReasonCode.CONTENT_FILTERED in out.reason_codes
    seen = await _per_route(sim_admin)
    assert seen == Counter({PRIMARY: 1})


async def test_content_filter_failover_opt_in_skips_the_same_model(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """With content_filter=failover a refusal moves to another model, never the same one."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "content_filter"}])
    await sim_admin.set_faults(OTHER_PROVIDER, [{"kind": "overloaded"}])
    out, _ = await _call(harness, options=CallOptions(content_filter="failover"))
    assert out.route == CHEAP and out.tier == 2
    assert ReasonCode.CONTENT_FILTERED in out.reason_codes
    seen = await _per_route(sim_admin)
    assert seen[PRIMARY] == 1 and seen[OTHER_REGION] == 0 and seen[OTHER_PROVIDER] == 1


async def test_provider_down_goes_to_other_provider(harness: Harness, sim_admin: SimAdmin) -> None:
    """Both Anthropic regions down: OpenAI answers; the Anthropic standby is never needed."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    await sim_admin.set_faults(OTHER_REGION, [{"kind": "connection_reset"}])
    out, _ = await _call(harness)
    assert out.route == OTHER_PROVIDER and out.tier == 1 and out.model == "gpt-4.1"
    seen = await _per_route(sim_admin)
    assert seen[PRIMARY] == 1 and seen[OTHER_REGION] == 0


async def test_everything_down_cache_then_static(harness: Harness, sim_admin: SimAdmin) -> None:
    """All live tiers down: a seen request is answered from cache, a new one statically."""
    req = _request("a request that was answered before")
    warm, _ = await _call(harness, request=req)
    assert warm.tier == 0
    for ep in (PRIMARY, OTHER_REGION, BEDROCK, VERTEX, OTHER_PROVIDER, CHEAP, LARGE):
        await sim_admin.set_faults(ep, [{"kind": "server_error"}])
    cached, _ = await _call(harness, request=req)
    assert cached.tier == 3 and cached.capability is Capability.DEGRADED
    assert ReasonCode.CACHED_RESPONSE in cached.reason_codes
    assert cached.content == warm.content and cached.cache_age_s is not None
    static, _ = await _call(harness, request=_request("a request never seen"))
    assert static.capability is Capability.STATIC and static.tier == 3
    assert ReasonCode.STATIC_FALLBACK in static.reason_codes
    # server errors are the one class Temporal retries on the same route, at most twice
    seen = await _per_route(sim_admin)
    assert all(n <= 1 + 2 * 2 for n in seen.values()), seen


#: The hedged role's TTFT budget in the hedge race: the primary hangs and must lose the race
#: (cancelled), not time out first. With the shipped 2 s, a loaded machine's slow dispatch
#: of the hedge attempt (schedule, poll, connect, stream) let the budget end the primary.
RACE_TTFT_BUDGET_MS = 15_000


@pytest.fixture
async def roomy_hedge_harness(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    """The harness with the ``hedged`` role's TTFT budget at :data:`RACE_TTFT_BUDGET_MS`."""
    hedged = policy.roles["hedged"].model_copy(update={"ttft_budget_ms": RACE_TTFT_BUDGET_MS})
    roomy = policy.model_copy(update={"roles": {**policy.roles, "hedged": hedged}})
    h, workers = await make_harness(dev_env.client, roomy)
    async with running(workers):
        yield h


async def test_hedge_races_a_slow_primary_and_cancels_the_loser(
    roomy_hedge_harness: Harness, sim_admin: SimAdmin
) -> None:
    """Stateless role: a hanging primary is raced after the hedge delay; the first good answer
    wins before the primary's TTFT budget would have failed it, and the loser is cancelled."""
    harness = roomy_hedge_harness
    await sim_admin.set_faults(PRIMARY, [{"kind": "hang"}])
    out, waited = await _call(harness, role="hedged")
    assert out.route == OTHER_PROVIDER
    assert ReasonCode.HEDGED in out.reason_codes
    by_route = {a.route: a for a in out.attempts}
    assert by_route[PRIMARY].outcome == "cancelled"
    assert by_route[OTHER_PROVIDER].hedge is True
    assert by_route[OTHER_PROVIDER].started_at - by_route[PRIMARY].started_at >= 0.2
    # Won before the primary's own TTFT budget ended it (read from the attempt records,
    # not from the wall clock around the whole call, which a busy machine stretches).
    budget_s = harness.policy.role("hedged").ttft_budget_ms / 1000
    won_at = by_route[OTHER_PROVIDER].finished_at
    assert won_at is not None and won_at - by_route[PRIMARY].started_at < budget_s
    assert waited >= 0.2  # the hedge delay was waited out, not skipped
    seen = await _per_route(sim_admin)
    assert seen[PRIMARY] == 1 and seen[OTHER_PROVIDER] == 1


async def test_cut_stream_continues_on_a_prefill_route(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A stream cut after partial output continues on a route that declares prefill support,
    and the answer is the partial text plus the continuation, never the truncated text."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "stream_cut", "after_tokens": 6}])
    await sim_admin.set_faults(OTHER_PROVIDER, [{"kind": "overloaded"}])
    out, _ = await _call(harness)
    # Claude on Bedrock is the first prefill-capable standby: the Converse wire continues
    # a trailing assistant turn as the Anthropic API does.
    assert out.route == BEDROCK
    assert ReasonCode.PREFILL_CONTINUATION in out.reason_codes
    assert ReasonCode.STREAM_INTERRUPTED in out.reason_codes
    assert out.content.startswith("[echo:") and out.content.rstrip().endswith("[end]")
    assert out.content.count("[echo:") == 1, "the partial text must not be repeated"
    assert "prefill" in next(a.note for a in out.attempts if a.route == BEDROCK)


async def test_slow_primary_is_demoted_before_any_timeout(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """Once the primary's rolling p95 breaches the role's SLA, calls go to the standby first:
    proactive substitution, with no attempt timing out on the slow route."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "latency", "seconds": 0.35}])
    for _ in range(4):  # min_samples of the tight SLA: each call succeeds, slowly
        out, _ = await _call(harness, role="tight-sla")
        assert out.route == PRIMARY and ReasonCode.SLA_DEMOTED not in out.reason_codes
    await sim_admin.clear_attempts()
    out, waited = await _call(harness, role="tight-sla")
    assert out.route == OTHER_PROVIDER and ReasonCode.SLA_DEMOTED in out.reason_codes
    assert all(a.outcome == "ok" for a in out.attempts if a.outcome != "skipped")
    assert (await _per_route(sim_admin))[PRIMARY] == 0, "a demoted route is not tried first"
    assert waited < 0.35 + 1.0


async def test_unknown_role_fails_the_workflow_naming_known_roles(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """A role missing from the worker's policy fails at once (no endless local retries)."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ActivityError, ApplicationError

    with pytest.raises(WorkflowFailureError) as info:
        await _call(harness, role="nope")
    cause = info.value.cause
    # a local activity's failure may arrive wrapped (ActivityError) or as the workflow's own
    app_err = cause.cause if isinstance(cause, ActivityError) else cause
    assert isinstance(app_err, ApplicationError) and app_err.type == "policy_error"
    assert "nope" in str(app_err) and "analyst" in str(app_err)
    assert await sim_admin.attempts() == []


async def test_exhausted_raises_typed_error_with_attempts_when_asked(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """on_exhausted=raise: every live route down fails the call with FailoverExhausted."""
    live = (PRIMARY, BEDROCK, VERTEX, OTHER_REGION, OTHER_PROVIDER, CHEAP, LARGE)
    for ep in live:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    with pytest.raises(WorkflowFailureError) as info:
        await _call(harness, options=CallOptions(on_exhausted="raise"))
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "failover_exhausted"
    assert cause.non_retryable
    details = cause.details[0]
    tried = [a for a in details["attempts"] if a["outcome"] != "skipped"]
    assert {a["route"] for a in tried} == set(live)
    # AWS refuses bad credentials with 403 (UnrecognizedClientException), the others 401.
    assert all(a["outcome"] == "auth" for a in tried)
    assert {a["route"]: a["http_status"] for a in tried if a["http_status"] != 401} == {
        BEDROCK: 403
    }
    assert "cache" not in {a["route"] for a in details["attempts"]}


async def test_roster_override_for_one_call(harness: Harness, sim_admin: SimAdmin) -> None:
    """A per-call roster is planned instead of the role's; the role's primary is never called."""
    opts = CallOptions(roster=RosterOverride(tier0=[OTHER_PROVIDER], tier1=[CHEAP]))
    out, _ = await _call(harness, options=opts)
    assert out.route == OTHER_PROVIDER and out.tier == 0 and out.capability is Capability.FULL
    assert await _per_route(sim_admin) == Counter({OTHER_PROVIDER: 1})


async def test_unknown_route_in_override_fails_at_once(harness: Harness) -> None:
    """A typo in a per-call roster ends the run with policy_error, naming the known routes."""
    opts = CallOptions(roster=RosterOverride(tier0=["gtp-4"]))
    with pytest.raises(WorkflowFailureError) as info:
        await _call(harness, options=opts)
    cause = info.value.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.cause
    assert cause is not None and cause.type == "policy_error" and "gtp-4" in str(cause)


async def test_tool_calls_and_finish_reason_reach_the_caller(
    harness: Harness, sim_admin: SimAdmin
) -> None:
    """The answering route's tool calls (ids, names, arguments) and finish reason are kept."""
    tool = ToolSpec(
        name="lookup",
        description="find an order",
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    )
    req = ChatRequest(
        messages=[Message(role="user", content="where is order 42?")],
        tools=[tool],
        tool_choice="lookup",
        max_tokens=200,
    )
    out, _ = await _call(harness, request=req)
    assert out.finish_reason is FinishReason.TOOL_CALLS
    assert [c.name for c in out.tool_calls] == ["lookup"]
    assert out.tool_calls[0].id and isinstance(out.tool_calls[0].arguments.get("order_id"), str)


async def test_failed_attempt_keeps_provider_facts(harness: Harness, sim_admin: SimAdmin) -> None:
    """A 429 with Retry-After is on record with its status, the provider's code and the hint."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "rate_limit", "retry_after": 20}])
    out, _ = await _call(harness)
    first = out.attempts[0]
    assert first.route == PRIMARY and first.outcome == "rate_limited"
    assert first.http_status == 429 and first.retry_after_s == 20
    assert first.provider_code  # e.g. Anthropic's "rate_limit_error"
    assert out.usage.input_tokens > 0 and out.usage.estimated is False
