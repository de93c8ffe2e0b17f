"""A support chat as one Temporal workflow; each question is an update run by FailoverRunner.

The conversation (the SDK's input list) stays in the workflow between questions, so a
provider that goes down between turns only changes who answers the next one. Each turn
returns the answer, the agent that gave it, the handoffs and tool calls (with their call
ids) and, per model call, the degradation contract agent-failover attached.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agents import HandoffCallItem, ToolCallItem
    from support_agents import triage_agent

    from agent_failover import AgentOutput
    from agent_failover.contrib.openai_agents import FailoverRunner, failover_outputs


class ToolCallInfo(BaseModel):
    id: str
    name: str
    args: str
    handoff: bool


class Turn(BaseModel):
    question: str
    answer: str
    answered_by: str
    tool_calls: list[ToolCallInfo]
    model_calls: list[AgentOutput]


@workflow.defn
class SupportChatWorkflow:
    def __init__(self) -> None:
        self.history: list[Any] = []
        self.turns: list[Turn] = []
        self.closed = False
        self.lock = asyncio.Lock()

    @workflow.run
    async def run(self) -> list[Turn]:
        await workflow.wait_condition(lambda: self.closed and workflow.all_handlers_finished())
        return self.turns

    @workflow.update
    async def ask(self, question: str) -> Turn:
        async with self.lock:  # one turn at a time: each builds on the history
            items = [*self.history, {"role": "user", "content": question}]
            result = await FailoverRunner().run(triage_agent, items)
            self.history = result.to_input_list()
            calls = [
                ToolCallInfo(
                    id=item.raw_item.call_id,
                    name=item.raw_item.name,
                    args=item.raw_item.arguments,
                    handoff=isinstance(item, HandoffCallItem),
                )
                for item in result.new_items
                if isinstance(item, ToolCallItem | HandoffCallItem)
            ]
            turn = Turn(
                question=question,
                answer=str(result.final_output),
                answered_by=result.last_agent.name,
                tool_calls=calls,
                model_calls=failover_outputs(result),
            )
            self.turns.append(turn)
            return turn

    @workflow.signal
    def close(self) -> None:
        self.closed = True
