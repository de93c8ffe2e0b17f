"""Two agents: a triage agent that hands weather questions off to a weather agent with two tools.

An agent's ``model`` is its agent-failover role (``policy.yaml``): ``FailoverRunner`` resolves
it to agent-failover instead of one OpenAI model, so each model call runs through that role's
failover plan. The tools are Temporal activities (``activity_as_tool``).
"""

from __future__ import annotations

from datetime import timedelta

from agents import Agent
from temporalio.openai_agents.workflow import activity_as_tool
from tools import get_local_time, get_weather

weather_agent = Agent(
    name="weather",
    model="weather",
    instructions="You answer weather questions. Use the tools, then answer briefly.",
    tools=[
        activity_as_tool(get_weather, start_to_close_timeout=timedelta(seconds=10)),
        activity_as_tool(get_local_time, start_to_close_timeout=timedelta(seconds=10)),
    ],
)

triage_agent = Agent(
    name="triage",
    model="triage",
    instructions="You route the customer to the right desk. Weather questions go to weather.",
    handoffs=[weather_agent],
)
