"""Tool calls inside an agent step (``run_agent_loop``) on the dev server and simulator:
the model calls tools, their results go back, a provider outage between turns fails over
without repeating a tool, the turn limit and the budget end the loop with a reason, and a
side-effecting tool is undone by the saga when a later step fails."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agent_failover.plugin import FailoverPlugin
from agent_failover.resilience.config import PolicyConfig
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.factory import Stores
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.testing.sim.admin import SimAdmin

with workflow.unsafe.imports_passed_through():
    from agent_failover import ChatRequest, Message, ToolSpec
    from agent_failover.resilience.saga import CompensationLog
    from agent_failover.saga import (
        AgentLoopResult,
        AgentTool,
        Saga,
        ToolCallInput,
        ToolCallResult,
        run_agent_loop,
    )

pytestmark = pytest.mark.devserver

PRIMARY = "anthropic-us-east"
#: Calls of the user's own tool activity (in-process worker).
RUNBOOK_CALLS: Counter[str] = Counter()
#: The loop worker's response cache (a turn that asks for tools must not be cached).
CACHES: list[MemoryResponseCache] = []
TITLE = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}


@activity.defn
async def lookup_runbook(inp: ToolCallInput) -> ToolCallResult:
    """A user's read-only tool that, for the test, takes the primary down as it runs."""
    RUNBOOK_CALLS[inp.idempotency_key] += 1
    admin = SimAdmin(os.environ["SIM_URL"])
    try:
        await admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
    finally:
        await admin.aclose()
    return ToolCallResult(
        tool=inp.tool, idempotency_key=inp.idempotency_key, status=200, result={"steps": 3}
    )


TOOLS = {
    "create_ticket": AgentTool(
        spec=ToolSpec(name="create_ticket", description="open a ticket", parameters=TITLE),
        activity="run_tool",
        compensation="compensate",
        undo_tool="close_ticket",
        timeout=timedelta(seconds=5),
    ),
    "post_message": AgentTool(
        spec=ToolSpec(name="post_message", parameters=TITLE),
        activity="run_tool",
        compensation="compensate",
        undo_tool="delete_message",
    ),
    "lookup_runbook": AgentTool(spec=ToolSpec(name="lookup_runbook"), activity=lookup_runbook),
}


class LoopIn(BaseModel):
    tools: list[str]
    max_turns: int = 4
    max_tokens: int | None = None
    fail_after: bool = False


class LoopOut(BaseModel):
    loop: AgentLoopResult
    log: CompensationLog


@workflow.defn(sandboxed=False)
class AgentLoopWorkflow:
    @workflow.run
    async def run(self, inp: LoopIn) -> LoopOut:
        saga = Saga()
        saga.attach_query()
        async with saga:
            loop = await run_agent_loop(
                "plain",
                ChatRequest(messages=[Message(role="user", content="handle the incident")]),
                tools=[TOOLS[n] for n in inp.tools],
                saga=saga,
                step="responder",
                max_turns=inp.max_turns,
                max_tokens=inp.max_tokens,
            )
            if inp.fail_after:
                raise ApplicationError("a later step failed", type="later", non_retryable=True)
        return LoopOut(loop=loop, log=saga.log)


@pytest.fixture
async def loop_worker(dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin):
    RUNBOOK_CALLS.clear()
    CACHES[:] = [MemoryResponseCache()]
    stores = Stores(MemoryHealthStore(), CACHES[0], "test")
    plugin = FailoverPlugin(policy, stores=stores, start_monitor=False, codec=False)
    tq = f"loop-{uuid.uuid4().hex[:8]}"
    async with Worker(
        dev_env.client,
        task_queue=tq,
        workflows=[AgentLoopWorkflow],
        activities=[lookup_runbook],
        plugins=[plugin],
        workflow_failure_exception_types=[Exception],
    ):
        yield dev_env.client, tq
    await plugin.aclose()


async def _start(loop_worker, inp: LoopIn):
    client, tq = loop_worker
    return await client.start_workflow(
        AgentLoopWorkflow.run,
        inp,
        id=f"loop-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
        result_type=LoopOut,
    )


async def test_outage_mid_loop_fails_over_without_repeating_tools(
    loop_worker, sim_admin: SimAdmin
) -> None:
    """Turn 1 on the primary calls lookup_runbook, which takes the primary down; turns 2-3
    fail over and carry on from the recorded results: each tool ran exactly once."""
    out: LoopOut = await (
        await _start(loop_worker, LoopIn(tools=["lookup_runbook", "create_ticket"]))
    ).result()
    loop = out.loop
    assert loop.stop_reason == "answered" and loop.turns == 3
    cached = [entry.content for entry, _ in CACHES[0]._items.values()]
    assert cached == [loop.output.content]  # only the final answer, never a tool turn
    assert [r.tool for r in loop.tool_runs] == ["lookup_runbook", "create_ticket"]
    assert all(r.ok and not r.reused for r in loop.tool_runs)
    assert sum(RUNBOOK_CALLS.values()) == 1
    assert [e.tool for e in await sim_admin.effects()] == ["create_ticket"]
    assert loop.output.route != PRIMARY and loop.output.tier >= 1
    primary = await sim_admin.attempts(endpoint=PRIMARY)
    assert primary and primary[0].outcome == "ok"  # turn 1 answered on the primary
    # The tool messages were sent with the ids of the calls they answer.
    assert loop.tool_runs[0].call_id and loop.tool_runs[0].call_id != loop.tool_runs[1].call_id
    assert [e.effect.step for e in out.log.entries] == ["responder/create_ticket"]


async def test_turn_limit_ends_the_loop_with_its_reason(loop_worker, sim_admin) -> None:
    """Two turns: the first runs create_ticket, the second asks for post_message: not run."""
    out: LoopOut = await (
        await _start(loop_worker, LoopIn(tools=["create_ticket", "post_message"], max_turns=2))
    ).result()
    assert out.loop.stop_reason == "turn_limit" and out.loop.turns == 2
    assert [r.tool for r in out.loop.tool_runs] == ["create_ticket"]
    assert [c.name for c in out.loop.output.tool_calls] == ["post_message"]
    assert [e.tool for e in await sim_admin.effects()] == ["create_ticket"]
    # Neither turn answered (both asked for tools): nothing was cached as an answer.
    assert CACHES[0]._items == {}


async def test_token_budget_ends_the_loop_before_any_tool(loop_worker, sim_admin) -> None:
    out: LoopOut = await (
        await _start(loop_worker, LoopIn(tools=["create_ticket"], max_tokens=1))
    ).result()
    assert out.loop.stop_reason == "budget" and out.loop.turns == 1
    assert out.loop.total_tokens >= 1 and out.loop.tool_runs == []
    assert await sim_admin.effects() == []


async def test_later_failure_undoes_the_agents_tool_call(loop_worker, sim_admin) -> None:
    handle = await _start(loop_worker, LoopIn(tools=["create_ticket"], fail_after=True))
    with pytest.raises(WorkflowFailureError) as err:
        await handle.result()
    assert isinstance(err.value.cause, ApplicationError) and err.value.cause.type == "later"
    log = await handle.query("compensation_log", result_type=CompensationLog)
    [entry] = log.entries
    assert entry.status.value == "compensated" and entry.effect.compensation_tool == "close_ticket"
    effects = await sim_admin.effects()
    assert [e.tool for e in effects] == ["create_ticket", "close_ticket"]
    assert effects[1].args == {"id": entry.effect.result["id"]}


async def test_a_failed_tool_goes_back_to_the_model_as_an_error(loop_worker, sim_admin) -> None:
    """create_ticket is rejected (400, not retried): the model gets {"error": ...} under the
    call's id and answers; nothing is logged for the saga to undo."""
    await sim_admin.set_tool_faults("create_ticket", [{"status": 400}])
    out: LoopOut = await (await _start(loop_worker, LoopIn(tools=["create_ticket"]))).result()
    assert out.loop.stop_reason == "answered" and out.loop.turns == 2
    [run] = out.loop.tool_runs
    assert not run.ok and "tool_rejected" in (run.error or "")
    assert out.log.entries == [] and await sim_admin.effects() == []
    assert (await sim_admin.tool_calls())["create_ticket"] == 1
