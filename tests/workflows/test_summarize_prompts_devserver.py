"""Prompt registry, structured-output path and summarization before truncation, end to end.

Real worker on the dev server, the simulator on a socket. What each route was sent is
read from the simulator's attempts log (system prompt, schema on the wire or not) and
from the ``call_model`` inputs in the workflow's history (the messages after triage).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import jsonschema
import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.prompts import SCHEMA_INSTRUCTION
from agent_failover.resilience.summarize import SUMMARY_HEADER, SUMMARY_SYSTEM
from agent_failover.testing.roles import GPT_VARIANT_PROMPT, QUALITY_SCHEMA, with_quality_roles
from agent_failover.testing.sim.admin import SimAdmin
from tests.workflows.conftest import Harness, make_harness, running

pytestmark = pytest.mark.devserver

PRIMARY, GPT, MINI = "anthropic-us-east", "openai-us", "cheap-mini"
TASK = "Task: migrate the billing service to the new queue without downtime."


async def _harness(env: WorkflowEnvironment, policy: PolicyConfig) -> AsyncIterator[Harness]:
    h, workers = await make_harness(env.client, policy)
    async with running(workers):
        yield h


@pytest_asyncio.fixture
async def qh(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    async for h in _harness(dev_env, with_quality_roles(policy)):
        yield h


@pytest_asyncio.fixture
async def fast_budget_h(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    async for h in _harness(dev_env, with_quality_roles(policy, summarize_budget_ms=400)):
        yield h


async def _call(h: Harness, role: str, request: ChatRequest) -> tuple[AgentOutput, str]:
    """One call and its workflow id (the tests read the run's history)."""
    wid = f"prompts-{uuid.uuid4().hex[:10]}"
    return await h.call(role, request, workflow_id=wid), wid


def _ask(text: str = "Summarize the incident") -> ChatRequest:
    body = f"{text} {uuid.uuid4().hex[:6]}"
    return ChatRequest(messages=[Message(role="user", content=body)], max_tokens=120)


def _long_request() -> ChatRequest:
    """~4.5k tokens: a pinned task statement, 8 long turns, the question."""
    msgs = [Message(role="user", content=TASK, pinned=True)]
    for i in range(8):
        msgs.append(Message(role="assistant", content=f"step {i}: " + "detail " * 250))
        msgs.append(Message(role="user", content=f"noted {i}: " + "more " * 250))
    msgs.append(Message(role="user", content=f"What is the next step? {uuid.uuid4().hex[:6]}"))
    return ChatRequest(messages=msgs, max_tokens=120)


async def _sent_requests(h: Harness, wid: str) -> list[dict]:
    """The ``call_model`` inputs of a run, in order (route and request as sent)."""
    history = await h.client.get_workflow_handle(wid).fetch_history()
    out = []
    for ev in history.events:
        if ev.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attrs = ev.activity_task_scheduled_event_attributes
        if attrs.activity_type.name == "call_model":
            out.append(json.loads(attrs.input.payloads[0].data))
    return out


async def test_substituted_call_uses_target_models_variant(qh: Harness, sim_admin: SimAdmin):
    """The primary is overloaded: the call moves to gpt-4.1, which is sent its own prompt
    variant (the primary got the role's default), schema on the wire (native)."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    out, _ = await _call(qh, "quality", _ask())
    assert out.route == GPT and out.tier == 1
    last = out.attempts[-1]
    assert (last.route, last.prompt_variant, last.structured_output) == (
        GPT,
        "model:gpt-4.1",
        "native",
    )
    assert out.attempts[0].prompt_variant == "default"
    rows = await sim_admin.attempts()
    default = qh.policy.role("quality").system_prompt
    assert {r.system for r in rows if r.endpoint == PRIMARY} == {default}
    gpt_rows = [r for r in rows if r.endpoint == GPT]
    assert [r.system for r in gpt_rows] == [GPT_VARIANT_PROMPT]
    assert gpt_rows[0].native_schema
    jsonschema.validate(out.data, QUALITY_SCHEMA)


async def test_missing_variant_falls_back_and_schema_goes_in_prompt(
    qh: Harness, sim_admin: SimAdmin
):
    """Tiers 0 and 1 down: cheap-mini has no variant (default prompt, with a note) and
    declares no native structured output: the schema is in its prompt, the answer validated."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    await sim_admin.set_faults(GPT, [{"kind": "overloaded"}])
    out, _ = await _call(qh, "quality", _ask())
    assert out.route == MINI and out.capability is Capability.DEGRADED
    last = out.attempts[-1]
    assert last.prompt_variant == "default" and last.structured_output == "prompt"
    assert "no prompt variant for model 'mistral-small-latest'" in last.note
    row = next(r for r in await sim_admin.attempts() if r.endpoint == MINI)
    assert not row.native_schema
    default = qh.policy.role("quality").system_prompt or ""
    assert row.system.startswith(default) and SCHEMA_INSTRUCTION in row.system
    jsonschema.validate(out.data, QUALITY_SCHEMA)


async def test_summarization_keeps_pinned_checkpoint(qh: Harness, sim_admin: SimAdmin):
    """The request does not fit openai-us-small's 2k window: the cheapest healthy route
    summarizes what triage would drop; the answer is CONTEXT_SUMMARIZED, and what the
    small route was sent holds the pinned task statement and the summary turn."""
    out, wid = await _call(qh, "summarizing", _long_request())
    assert out.route == "openai-us-small"
    assert ReasonCode.CONTEXT_SUMMARIZED in out.reason_codes
    assert out.capability is Capability.DEGRADED
    assert "summarized by cheap-mini" in out.attempts[-1].note
    rows = await sim_admin.attempts()
    assert [r.system for r in rows if r.endpoint == MINI] == [SUMMARY_SYSTEM]
    sent = await _sent_requests(qh, wid)
    assert [s["route"] for s in sent] == [MINI, "openai-us-small"]
    contents = [m["content"] for m in sent[1]["request"]["messages"]]
    assert contents[0] == TASK
    assert any(c.startswith(SUMMARY_HEADER.split("{")[0]) for c in contents)


async def test_summarization_timeout_falls_back_to_triage(
    fast_budget_h: Harness, sim_admin: SimAdmin
):
    """The summarizing route is slower than the 400 ms budget: plain triage, a note that
    says so, no CONTEXT_SUMMARIZED, and the pinned task statement still sent."""
    await sim_admin.set_faults(MINI, [{"kind": "latency", "seconds": 3}])
    out, wid = await _call(fast_budget_h, "summarizing", _long_request())
    assert out.route == "openai-us-small"
    assert ReasonCode.CONTEXT_SUMMARIZED not in out.reason_codes
    assert ReasonCode.CONTEXT_TRUNCATED in out.reason_codes
    note = out.attempts[-1].note
    assert "on cheap-mini failed (timeout after 400 ms" in note and "plain triage" in note
    sent = await _sent_requests(fast_budget_h, wid)
    contents = [m["content"] for m in sent[-1]["request"]["messages"]]
    assert contents[0] == TASK
    assert not any(c.startswith(SUMMARY_HEADER.split("{")[0]) for c in contents)


async def test_callers_own_system_prompt_is_never_replaced(qh: Harness, sim_admin: SimAdmin):
    """A request that brings its own system prompt keeps it on the substituted route too."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    req = _ask().model_copy(update={"system": "Caller's own instructions."})
    out, _ = await _call(qh, "quality", req)
    assert out.route == GPT and out.attempts[-1].prompt_variant == "caller"
    rows = [r for r in await sim_admin.attempts() if r.endpoint == GPT]
    assert [r.system for r in rows] == ["Caller's own instructions."]
