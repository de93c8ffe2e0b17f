"""The weather assistant: a PydanticAI agent with two tools, answering through agent-failover.

The only agent-failover lines are the model (``FailoverModel("weather")``: the ``weather``
role of ``policy.yaml`` instead of one provider's model or a ``FallbackModel``) and the
durability capability (``FailoverDurability()`` instead of PydanticAI's
``TemporalDurability()``). The tools run as PydanticAI's tool activities; each model attempt
is an agent-failover ``call_model`` activity. (On PydanticAI's deprecated wrapper path:
``FailoverTemporalAgent(agent)`` instead of ``TemporalAgent(agent)``.)
"""

from __future__ import annotations

from pydantic_ai import Agent

from agent_failover.contrib.pydantic_ai import FailoverDurability, FailoverModel

# A tiny "weather service": deterministic, so runs are comparable.
_WEATHER = {"lyon": "14°C, light rain", "paris": "17°C, sunny", "berlin": "9°C, overcast"}
_UTC_OFFSET = {"lyon": 2, "paris": 2, "berlin": 2}

weather_agent = Agent(
    FailoverModel("weather"),
    name="weather",
    instructions="You answer questions about the weather. Use the tools, then answer briefly.",
    capabilities=[FailoverDurability()],
)


@weather_agent.tool_plain
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return _WEATHER.get(city.strip().lower(), f"no weather station in {city}")


@weather_agent.tool_plain
def get_local_time(city: str) -> str:
    """Local time offset of a city, relative to UTC."""
    offset = _UTC_OFFSET.get(city.strip().lower())
    return f"UTC+{offset}" if offset is not None else f"unknown time zone for {city}"
