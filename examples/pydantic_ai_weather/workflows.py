"""A chat with the weather assistant as one Temporal workflow; each question is an update.

Between two questions the conversation (PydanticAI's message history) stays in the
workflow, so a provider that goes down between turns only changes who answers the next one.
Each turn returns the answer, the tool calls it made (with their ids) and, per model
request, the degradation contract agent-failover attached (route, tier, attempts).
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from weather_agent import weather_agent

    from agent_failover import AgentOutput
    from agent_failover.contrib.pydantic_ai import failover_outputs


class ToolCallInfo(BaseModel):
    id: str
    name: str
    args: dict


class Turn(BaseModel):
    question: str
    answer: str
    tool_calls: list[ToolCallInfo]
    model_calls: list[AgentOutput]


@workflow.defn
class WeatherChatWorkflow:
    # PydanticAIPlugin registers this agent's tool activities on the worker.
    __pydantic_ai_agents__ = [weather_agent]

    def __init__(self) -> None:
        self.history: list[ModelMessage] = []
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
            result = await weather_agent.run(question, message_history=self.history)
            new = result.new_messages()
            self.history = result.all_messages()
            turn = Turn(
                question=question,
                answer=result.output,
                tool_calls=[
                    ToolCallInfo(id=p.tool_call_id, name=p.tool_name, args=p.args_as_dict())
                    for m in new
                    if isinstance(m, ModelResponse)
                    for p in m.parts
                    if isinstance(p, ToolCallPart)
                ],
                model_calls=failover_outputs(new),
            )
            self.turns.append(turn)
            return turn

    @workflow.signal
    def close(self) -> None:
        self.closed = True
