"""Replaying one incident against policies: on the dev server, two policies side by side
see the same recorded outage and differ as their rosters say; on the time-skipping
server, :class:`ReplayClockTransport` plays an incident on skipped time."""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml
from rich.console import Console
from temporalio.testing import WorkflowEnvironment

from agent_failover.cli.drill import drill_policy
from agent_failover.cli.replay import compare_table, replay_policies
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.providers.client import build_http_client
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.testing.harness import build_harness, running
from agent_failover.testing.replay import ReplayClockTransport, load_cassette, start_replay
from agent_failover.testing.replay.report import replay_settings
from agent_failover.testing.workflows import CallInput, ResilientCallWorkflow
from tests.replay.helpers import at, example_exchange, write_cassette

PRIMARY, STANDBY = "anthropic-us-east", "bedrock-us-west-2"
ROUTES = [
    "bedrock-us-west-2", "vertex-europe-west1", "anthropic-eu-west", "openai-us",
    "cheap-mini", "gemini-flash",
]  # fmt: skip


def _outage_tape(folder: Path, *, outage_from: float = 0.0) -> Path:
    """Every route healthy; the primary healthy until ``outage_from``, then 529."""
    exchanges = [at(example_exchange(r, 200), 0.0) for r in ROUTES]
    exchanges.append(at(example_exchange(PRIMARY, 200), 0.0))
    exchanges.append(at(example_exchange(PRIMARY, 529), outage_from))
    return write_cassette(folder, exchanges)


def _standby_first(tmp_path: Path) -> Path:
    """The demo policy with the analyst (so ``plain``) calling the standby first."""
    doc = yaml.safe_load(Path(DEFAULT_POLICY_PATH).read_text())
    roster = doc["roles"]["analyst"]["roster"]
    roster["tier0"] = [STANDBY]
    roster["tier1"] = [r for r in roster["tier1"] if r != STANDBY] + [PRIMARY]
    path = tmp_path / "standby_first.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_two_policies_side_by_side(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """Primary down the whole time: the demo policy answers on tier 1 after a failed
    attempt on the primary; the standby-first policy answers on its tier 0 at once."""
    tape = load_cassette(_outage_tape(tmp_path / "tape"))
    settings = replay_settings(tape, rate_per_s=2.0, duration_s=1.5, request_timeout_s=20.0)
    policies = [Path(DEFAULT_POLICY_PATH), _standby_first(tmp_path)]
    console = Console(record=True, width=160)
    runs = await replay_policies(dev_env.client, tape, policies, settings, console)
    demo, standby = (runs[label][0]["overall"] for label in ("policy", "standby_first"))
    assert demo["success_rate"] == standby["success_rate"] == 1.0
    assert demo["tier_share"] == {"1": 1.0} and standby["tier_share"] == {"0": 1.0}
    assert demo["amplification"] > 1.0 and standby["amplification"] == 1.0
    console.print(compare_table({k: v[0] for k, v in runs.items()}, "side by side"))
    text = console.export_text()
    assert "standby_first" in text and "attempts/answer" in text


async def test_incident_on_skipped_time(ts_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """The primary fails from 10 minutes in: a call at the start is answered by it, a
    call after a 15-minute (skipped) sleep fails over, in seconds of real time."""
    tape = load_cassette(_outage_tape(tmp_path / "tape", outage_from=600.0))
    async with await start_replay(tape) as replay:
        policy = drill_policy(DEFAULT_POLICY_PATH, replay.url)
        transport = ReplayClockTransport()
        http = build_http_client(policy.endpoints.values(), transport=transport)
        h, workers = build_harness(ts_env.client, policy, http=http)
        transport.start((await ts_env.get_current_time()).timestamp())
        try:
            async with running(workers):
                before = await _call(ts_env, h.task_queue)
                await ts_env.sleep(900)
                after = await _call(ts_env, h.task_queue)
        finally:
            await http.aclose()
    assert before.route == PRIMARY and before.tier == 0
    assert after.route != PRIMARY and after.tier == 1
    assert max(replay.state.arrivals) >= 900.0


async def _call(env: WorkflowEnvironment, task_queue: str) -> AgentOutput:
    request = ChatRequest(messages=[Message(role="user", content="hello")], max_tokens=16)
    return await env.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role="plain", request=request),
        id=f"replay-ts-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=AgentOutput,
    )
