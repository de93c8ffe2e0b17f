"""For comparison: the same agent with PydanticAI's own FallbackModel inside TemporalAgent.

    SIM_URL=http://127.0.0.1:8400 python baseline_fallback.py --outage-between-turns anthropic-us-east

Runs its own worker in this process. Every model request is ONE PydanticAI activity
(``agent__weather_baseline__model_request``) with the fallback inside it: the Temporal UI
shows no attempt, no route and no failure; the 529 and the switch happen out of sight.
Prints the run's activities as the Temporal UI lists them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin, TemporalAgent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from temporalio import workflow
from temporalio.worker import Worker

from agent_failover import connect_client
from agent_failover.testing import SimAdmin, activity_rows, format_rows

SIM = os.environ.get("SIM_URL", "http://127.0.0.1:8400")
primary = AnthropicModel(
    "claude-sonnet-4-5",
    provider=AnthropicProvider(base_url=f"{SIM}/anthropic-us-east", api_key="sim"),
)
standby = OpenAIChatModel(
    "gpt-4.1", provider=OpenAIProvider(base_url=f"{SIM}/openai-us/v1", api_key="sim")
)
agent = Agent(
    FallbackModel(primary, standby),
    name="weather_baseline",
    instructions="You answer questions about the weather. Use the tools, then answer briefly.",
)


@agent.tool_plain
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return "14°C, light rain"


@agent.tool_plain
def get_local_time(city: str) -> str:
    """Local time offset of a city, relative to UTC."""
    return "UTC+2"


baseline_agent = TemporalAgent(agent)


# Unsandboxed for brevity: this comparison script defines its workflow in __main__.
@workflow.defn(sandboxed=False)
class BaselineChatWorkflow:
    __pydantic_ai_agents__ = [baseline_agent]

    @workflow.run
    async def run(self, questions: list[str]) -> list[str]:
        history: list = []
        answers = []
        for i, question in enumerate(questions):
            if i:
                await workflow.wait_condition(lambda: self.go, timeout=None)
            result = await baseline_agent.run(question, message_history=history)
            history = result.all_messages()
            answers.append(result.output)
            self.go = False
        return answers

    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def next_turn(self) -> None:
        self.go = True


async def main(outage: str | None) -> None:
    client = await connect_client()
    queue = f"baseline-{uuid.uuid4().hex[:6]}"
    async with Worker(
        client, task_queue=queue, workflows=[BaselineChatWorkflow], plugins=[PydanticAIPlugin()]
    ):
        handle = await client.start_workflow(
            BaselineChatWorkflow.run,
            ["What's the weather in Lyon right now?", "And how about Paris?"],
            id=f"baseline-chat-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )
        while not [r for r in await activity_rows(handle) if r.outcome == "completed"][2:]:
            await asyncio.sleep(0.2)  # wait for the first turn's three activities
        if outage:
            async with SimAdmin(SIM) as admin:
                await admin.set_faults(outage, [{"kind": "overloaded"}])
        await handle.signal(BaselineChatWorkflow.next_turn)
        await handle.result()
        print(f"Activities of workflow {handle.id} (as the Temporal UI lists them):")
        print(format_rows(await activity_rows(handle)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-between-turns", metavar="ENDPOINT", default=None)
    asyncio.run(main(parser.parse_args().outage_between_turns))
