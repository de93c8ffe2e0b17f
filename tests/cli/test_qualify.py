"""`failover qualify` end to end: table, lock file, CI gate exit code, re-run reuses."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from temporalio.testing import WorkflowEnvironment

from agent_failover.cli.qualify import QualifyArgs, build_input
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.config.lock import read_lock
from agent_failover.datasets import DATASETS_DIR
from agent_failover.resilience.config import PolicyConfig
from agent_failover.testing.harness import Harness, make_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.faults import Fault, FaultKind
from agent_failover.workflows.qualify import QualifyWorkflow, qualify_workflow_id
from tests.cli.conftest import address_of, assert_one_line_error, invoke

pytestmark = pytest.mark.devserver

FALLBACKS = [
    "bedrock-us-west-2",
    "vertex-europe-west1",
    "anthropic-eu-west",
    "openai-us",
    "cheap-mini",
    "gemini-flash",
]


@pytest_asyncio.fixture
async def worker(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> AsyncIterator[Harness]:
    h, workers = await make_harness(dev_env.client, policy)
    async with running(workers):
        yield h


def _args(h: Harness, dev_env: WorkflowEnvironment, *extra: str) -> list[str]:
    return [
        "qualify",
        "--policy",
        str(DEFAULT_POLICY_PATH),
        "--address",
        address_of(dev_env),
        "--task-queue",
        h.task_queue,
        *extra,
    ]


def _small_set(tmp_path: Path, n: int = 4) -> Path:
    lines = (DATASETS_DIR / "analyst.jsonl").read_text().splitlines()[:n]
    path = tmp_path / "analyst-small.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_qualify_writes_the_lock_and_reuses_a_completed_run(
    worker: Harness, dev_env: WorkflowEnvironment, sim_admin: SimAdmin, tmp_path: Path
) -> None:
    """Exit 0 with a qualified fallback; the lock holds the role's verdicts (quality,
    p50/p95, date, hash); the same command again reuses the run and calls nothing."""
    await sim_admin.set_accuracy("cheap-mini", 0.0)
    lock = tmp_path / "roster.lock.yaml"
    lock.write_text(yaml.safe_dump({"version": 1, "roles": {}}))
    args = _args(worker, dev_env, "--role", "analyst", "--output", str(lock))
    result = await invoke(args)
    assert result.exit_code == 0, result.output
    assert "UNQUALIFIED" in result.stdout and "qualified" in result.stdout
    entry = read_lock(lock).roles["analyst"]
    assert entry.golden_set == "analyst.jsonl" and len(entry.golden_hash) == 16
    # No --min-quality: no absolute floor; the gate is 85 % of the primary's score.
    assert entry.min_quality == 0.0 and entry.qualified_at.startswith("20")
    assert entry.golden_path is not None and set(entry.fingerprint) == {
        "system_prompt", "output_schema", "tools",
    }  # fmt: skip
    assert not entry.routes["cheap-mini"].qualified
    assert entry.routes["anthropic-us-east"].latency_p95_ms is not None
    calls = len(await sim_admin.attempts())
    again = await invoke(args)
    assert again.exit_code == 0, again.output
    assert "reusing the completed run" in again.stdout
    assert len(await sim_admin.attempts()) == calls


async def test_role_without_a_qualified_fallback_exits_3(
    worker: Harness, dev_env: WorkflowEnvironment, sim_admin: SimAdmin, tmp_path: Path
) -> None:
    """Every fallback below min_quality: the lock is still written, and the command exits
    3 with one error line saying the role has no qualified fallback (CI gate)."""
    for route in FALLBACKS:
        await sim_admin.set_accuracy(route, 0.0)
    lock = tmp_path / "lock.yaml"
    golden = _small_set(tmp_path)
    result = await invoke(
        _args(worker, dev_env, "--role", "analyst", "--golden", str(golden), "--output", str(lock))
    )
    assert_one_line_error(result, 3, "no qualified fallback", "analyst")
    assert read_lock(lock).roles["analyst"].routes["anthropic-us-east"].qualified


async def test_bad_golden_set_is_exit_2_naming_the_line(
    worker: Harness, dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A golden line that is not JSON, or misses a field, is named with its line number."""
    golden = tmp_path / "bad.jsonl"
    golden.write_text('{"id": "a", "prompt": "Compute 1 + 1", "expected": "2"}\nnot json\n'
                      + json.dumps({"id": "c"}) + "\n")  # fmt: skip
    result = await invoke(_args(worker, dev_env, "--role", "analyst", "--golden", str(golden)))
    assert result.exit_code == 2, result.output
    assert "bad.jsonl:2: not JSON" in result.stderr and "bad.jsonl:3: prompt" in result.stderr


async def test_rerun_attaches_to_the_running_qualification(
    worker: Harness, dev_env: WorkflowEnvironment, sim_admin: SimAdmin, tmp_path: Path
) -> None:
    """A run already going (its CLI died) is attached to, not started twice: every
    (item, route) pair reaches the simulator exactly once."""
    for route in ("anthropic-us-east", *FALLBACKS):
        await sim_admin.set_faults(route, [Fault(kind=FaultKind.LATENCY, seconds=0.05)])
    golden = _small_set(tmp_path, 6)
    cfg = load_policy(DEFAULT_POLICY_PATH, with_lock=False)
    inp = build_input(QualifyArgs("analyst", golden, None, None, None, None, 4, False), cfg, golden)
    await dev_env.client.start_workflow(
        QualifyWorkflow.run, inp, id=qualify_workflow_id(inp), task_queue=worker.task_queue
    )
    args = ["--role", "analyst", "--golden", str(golden), "--output", str(tmp_path / "l.yaml")]
    result = await invoke(_args(worker, dev_env, *args))
    assert result.exit_code == 0, result.output
    assert "attached to the running" in result.stdout
    calls = Counter(a.endpoint for a in await sim_admin.attempts())
    assert calls == {r: 6 for r in inp.routes}
