"""The PydanticAI and OpenAI Agents SDK examples run end to end as the README says (worker and
starter processes, dev server, simulator): the primary goes down between two turns, the
second turn's model calls fail over, and the agent loop completes with its tool calls."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.testing.sim.server import RunningSimulator

pytest.importorskip("pydantic_ai", reason="extra [pydantic-ai] not installed")
pytest.importorskip("agents", reason="extra [openai-agents] not installed")

pytestmark = pytest.mark.devserver
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PRIMARY = "anthropic-us-east"  # the simulator endpoint behind route claude-us
TOOLS = {"get_weather", "get_local_time"}


def _env(dev_env: WorkflowEnvironment, sim: RunningSimulator, queue_var: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FAILOVER_POLICY")}
    queue = f"ex-{uuid.uuid4().hex[:8]}"
    return {
        **env,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "SIM_URL": sim.url,
        queue_var: queue,
        "FAILOVER_REDIS_NAMESPACE": f"test-example-{queue}",
    }


async def _run_example(folder: Path, env: dict[str, str]) -> tuple[list[dict], str]:
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "worker.py", cwd=folder, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert worker.stdout is not None
    try:
        line = await asyncio.wait_for(worker.stdout.readline(), 90)
        if b"worker ready" not in line:
            _, err = await worker.communicate()
            pytest.fail(f"{folder.name} worker did not start: {line!r}\n{err.decode()[-3000:]}")
        starter = await asyncio.create_subprocess_exec(
            sys.executable, "starter.py", "--outage-between-turns", PRIMARY,
            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(starter.communicate(), 120)
        assert starter.returncode == 0, err.decode()[-3000:]
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)
    text = out.decode()
    return json.loads(text.strip().splitlines()[-1]), text


def _check_turns(turns: list[dict]) -> None:
    """Turn 1 on the primary; turn 2 on a standby after a 529; tool calls intact."""
    first, second = turns
    assert {c["route"] for c in first["model_calls"]} == {"claude-us"}
    assert all(c["tier"] == 0 and len(c["attempts"]) == 1 for c in first["model_calls"])
    for call in second["model_calls"]:
        assert call["tier"] == 1 and call["capability"] == "full", call
        assert call["route"] in ("claude-eu", "gpt-us")
        assert call["attempts"][0]["route"] == "claude-us"
        assert call["attempts"][0]["outcome"] in ("overloaded", "skipped")
    failed = [a for c in second["model_calls"] for a in c["attempts"] if a["outcome"] != "ok"]
    assert any(a["http_status"] == 529 for a in failed)
    for turn in turns:
        tools = [c for c in turn["tool_calls"] if not c.get("handoff")]
        assert {c["name"] for c in tools} == TOOLS
        # every tool call the agent ran is the one a model call asked for, with its id
        asked = {(t["id"], t["name"]) for c in turn["model_calls"] for t in c["tool_calls"]}
        assert {(c["id"], c["name"]) for c in turn["tool_calls"]} <= asked
        assert turn["answer"].endswith("[end]")  # the final text answer is complete


async def test_pydantic_ai_agent_fails_over_between_turns(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator, sim_admin: object
) -> None:
    """PydanticAI: FailoverDurability; tools as PydanticAI activities; no model activity."""
    env = _env(dev_env, simulator, "WEATHER_TASK_QUEUE")
    turns, printed = await _run_example(EXAMPLES / "pydantic_ai_weather", env)
    _check_turns(turns)
    assert "call_model" in printed and "weather → claude-us (tier 0)" in printed
    assert "overloaded" in printed and "call tool: <agent>:get_weather" in printed
    assert "model_request" not in printed  # PydanticAI's one-activity model call is not used


async def test_openai_agents_handoff_fails_over_between_turns(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator, sim_admin: object
) -> None:
    """Agents SDK: FailoverRunner; triage hands off to weather each turn; tools as activities."""
    env = _env(dev_env, simulator, "SUPPORT_TASK_QUEUE")
    turns, printed = await _run_example(EXAMPLES / "openai_agents_handoff", env)
    _check_turns(turns)
    for turn in turns:
        assert turn["answered_by"] == "weather"
        assert [c["name"] for c in turn["tool_calls"] if c["handoff"]] == ["transfer_to_weather"]
        assert turn["model_calls"][0]["role"] == "triage"
    assert "triage → claude-us (tier 0)" in printed and "invoke_model_activity" not in printed
