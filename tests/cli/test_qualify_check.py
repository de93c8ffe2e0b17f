"""`failover qualify --check`: the CI gate run in-process, with no Temporal server."""

from __future__ import annotations

from pathlib import Path

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.lock import read_lock
from agent_failover.datasets import DATASETS_DIR
from agent_failover.testing.sim.admin import SimAdmin
from tests.cli.conftest import invoke

FALLBACKS = ["bedrock-us-west-2", "vertex-europe-west1", "anthropic-eu-west", "openai-us",
             "cheap-mini", "gemini-flash"]  # fmt: skip
#: Nothing listens here: a command that tried to reach Temporal would fail.
NO_TEMPORAL = {"TEMPORAL_ADDRESS": "127.0.0.1:9"}


def _small_set(tmp_path: Path, n: int = 4) -> Path:
    lines = (DATASETS_DIR / "analyst.jsonl").read_text().splitlines()[:n]
    path = tmp_path / "analyst-small.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return ["qualify", "--check", "--policy", str(DEFAULT_POLICY_PATH), "--role", "analyst",
            "--golden", str(_small_set(tmp_path)), *extra]  # fmt: skip


async def test_check_passes_without_a_temporal_server_and_writes_only_with_output(
    sim_admin: SimAdmin, tmp_path: Path
) -> None:
    """With the routes as accurate as the primary, every route qualifies and the check
    exits 0 without Temporal; cheap-mini, always wrong, is UNQUALIFIED against 85 % of the
    primary's score; --output writes the lock with the role's hashes."""
    await sim_admin.set_accuracy("anthropic-us-east", 1.0)
    await sim_admin.set_accuracy("cheap-mini", 0.0)
    for route in ("bedrock-us-west-2", "openai-us"):
        await sim_admin.set_accuracy(route, 1.0)
    result = await invoke(_args(tmp_path), env=NO_TEMPORAL)
    assert result.exit_code == 0, result.output
    row = next(x for x in result.stdout.splitlines() if " cheap-mini " in x)
    assert "UNQUALIFIED: quality 0.00 < 85%" in row, result.stdout
    assert "every role has a qualified fallback" in result.stdout
    assert not (tmp_path / "r.lock.yaml").exists()
    lock = tmp_path / "r.lock.yaml"
    result = await invoke(_args(tmp_path, "--output", str(lock)), env=NO_TEMPORAL)
    assert result.exit_code == 0, result.output
    entry = read_lock(lock).roles["analyst"]
    assert set(entry.fingerprint) == {"system_prompt", "output_schema", "tools"}
    assert entry.golden_path == "analyst-small.jsonl"
    assert not entry.routes["cheap-mini"].qualified and entry.routes["openai-us"].qualified


async def test_check_exits_3_when_no_fallback_qualifies(
    sim_admin: SimAdmin, tmp_path: Path
) -> None:
    """Every fallback always wrong: exit 3, one error line naming the role and each
    fallback's failed gate."""
    await sim_admin.set_accuracy("anthropic-us-east", 1.0)
    for route in FALLBACKS:
        await sim_admin.set_accuracy(route, 0.0)
    result = await invoke(_args(tmp_path), env=NO_TEMPORAL)
    assert result.exit_code == 3, result.output
    [line] = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert line.startswith("error: role 'analyst': no qualified fallback")
    assert "cheap-mini: quality 0.00 < 85% of the primary's 1.00" in line
