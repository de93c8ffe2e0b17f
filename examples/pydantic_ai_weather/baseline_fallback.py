"""For comparison: the same agent with PydanticAI's own FallbackModel inside TemporalAgent.

    SIM_URL=http://127.0.0.1:8400 python baseline_fallback.py \
        --outage-between-turns anthropic-us-east

Runs its own worker in this process. Every model request is ONE PydanticAI activity
(``agent__weather_baseline__model_request``) with the fallback inside it: the Temporal UI
shows no attempt, no route and no failure; the 529 and the switch happen out of sight.
Prints the run's activities as the Temporal UI lists them.
"""

from __future__ import annotations

import argparse
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

from agent_failover import connect_client, run_and_exit
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

    def __init__(self) -> None:
        self.history: list = []
        self.closed = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.closed and workflow.all_handlers_finished())

    @workflow.update
    async def ask(self, question: str) -> str:
        result = await baseline_agent.run(question, message_history=self.history)
        self.history = result.all_messages()
        return result.output

    @workflow.signal
    def close(self) -> None:
        self.closed = True


async def main(outage: str | None) -> None:
    client = await connect_client()
    queue = f"baseline-{uuid.uuid4().hex[:6]}"
    async with Worker(
        client, task_queue=queue, workflows=[BaselineChatWorkflow], plugins=[PydanticAIPlugin()]
    ):
        handle = await client.start_workflow(
            BaselineChatWorkflow.run, id=f"baseline-chat-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        await handle.execute_update(BaselineChatWorkflow.ask, "What's the weather in Lyon?")
        if outage:
            async with SimAdmin(SIM) as admin:
                await admin.set_faults(outage, [{"kind": "overloaded"}])
        await handle.execute_update(BaselineChatWorkflow.ask, "And how about Paris?")
        await handle.signal(BaselineChatWorkflow.close)
        await handle.result()
        print(f"Activities of workflow {handle.id} (as the Temporal UI lists them):")
        print(format_rows(await activity_rows(handle)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-between-turns", metavar="ENDPOINT", default=None)
    run_and_exit(main(parser.parse_args().outage_between_turns))
