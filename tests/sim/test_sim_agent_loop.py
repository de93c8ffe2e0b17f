"""Offered tools (tool_choice auto) make an agent loop: each tool called once, then an answer."""

from __future__ import annotations

import json
from typing import Any

import httpx

from agent_failover.testing.sim.server import RunningSimulator
from tests.sim.simtest_helpers import anthropic_body, anthropic_url, openai_body, openai_url

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
NAMES = ("get_weather", "get_time")


def _openai_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "parameters": PARAMS}} for n in NAMES]


def _anthropic_tools() -> list[dict[str, Any]]:
    return [{"name": n, "description": n, "input_schema": PARAMS} for n in NAMES]


async def _openai_turn(http: httpx.AsyncClient, sim: RunningSimulator, body: dict) -> dict:
    r = await http.post(openai_url(sim), json=body)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


async def test_openai_loop_calls_each_offered_tool_once_then_answers(sim, http) -> None:
    """auto: get_weather, then get_time after its result, then text; a new user turn restarts."""
    body = openai_body("weather and time in Lyon", tools=_openai_tools(), tool_choice="auto")
    names = []
    for _ in NAMES:
        choice = await _openai_turn(http, sim, body)
        assert choice["finish_reason"] == "tool_calls"
        call = choice["message"]["tool_calls"][0]
        assert "city" in json.loads(call["function"]["arguments"])
        names.append(call["function"]["name"])
        body["messages"] += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
        ]
    assert names == list(NAMES)
    final = await _openai_turn(http, sim, body)
    assert final["finish_reason"] == "stop" and final["message"]["content"].startswith("[echo:")
    body["messages"].append({"role": "user", "content": "and tomorrow?"})
    again = await _openai_turn(http, sim, {**body, "tool_choice": None})
    assert again["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


async def test_openai_none_never_calls_and_required_picks_the_next_tool(sim, http) -> None:
    """tool_choice none answers in text; required calls the first tool not called yet."""
    none = await _openai_turn(http, sim, openai_body(tools=_openai_tools(), tool_choice="none"))
    assert none["finish_reason"] == "stop" and "tool_calls" not in none["message"]
    body = openai_body(tools=_openai_tools(), tool_choice="required")
    body["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": NAMES[0], "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    required = await _openai_turn(http, sim, body)
    assert required["message"]["tool_calls"][0]["function"]["name"] == NAMES[1]


async def test_anthropic_loop_tool_results_are_not_a_user_turn(sim, http) -> None:
    """Anthropic: tool_result-only user messages keep the loop going; then a text answer."""
    body = anthropic_body("weather and time in Lyon", tools=_anthropic_tools())
    names = []
    for _ in NAMES:
        r = await http.post(anthropic_url(sim), json=body)
        msg = r.json()
        assert msg["stop_reason"] == "tool_use", msg
        block = msg["content"][0]
        names.append(block["name"])
        body["messages"] += [
            {"role": "assistant", "content": [block]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "x"}],
            },
        ]
    assert names == list(NAMES)
    final = (await http.post(anthropic_url(sim), json=body)).json()
    assert final["stop_reason"] == "end_turn" and final["content"][0]["type"] == "text"
