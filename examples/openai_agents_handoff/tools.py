"""The weather desk's two tools, as Temporal activities (``activity_as_tool`` offers them)."""

from __future__ import annotations

from temporalio import activity

# A tiny "weather service": deterministic, so runs are comparable.
_WEATHER = {"lyon": "14°C, light rain", "paris": "17°C, sunny", "berlin": "9°C, overcast"}
_UTC_OFFSET = {"lyon": 2, "paris": 2, "berlin": 2}


@activity.defn
async def get_weather(city: str) -> str:
    """Current weather for a city."""
    return _WEATHER.get(city.strip().lower(), f"no weather station in {city}")


@activity.defn
async def get_local_time(city: str) -> str:
    """Local time offset of a city, relative to UTC."""
    offset = _UTC_OFFSET.get(city.strip().lower())
    return f"UTC+{offset}" if offset is not None else f"unknown time zone for {city}"
