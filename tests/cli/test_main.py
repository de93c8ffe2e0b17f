"""The ``failover`` CLI: help on every command, policy checks with exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_failover.cli.main import app
from agent_failover.config import DEFAULT_POLICY_PATH

runner = CliRunner()
COMMANDS = ["sim", "worker", "dev", "run", "status", "force", "resolve", "demo", "drill", "config"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    """`failover COMMAND --help` exits 0 and describes the command."""
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_config_check_accepts_the_demo_policy() -> None:
    """The shipped demo policy is valid."""
    result = runner.invoke(app, ["config", "check", str(DEFAULT_POLICY_PATH)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("OK")


def test_config_check_rejects_a_bad_policy_with_field_paths(tmp_path: Path) -> None:
    """A bad policy exits 2 and names the field and the problem."""
    text = DEFAULT_POLICY_PATH.read_text().replace(
        "tier1: [bedrock-us-west-2,", "tier1: [gpt-x,", 1
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = runner.invoke(app, ["config", "check", str(bad)])
    assert result.exit_code == 2
    assert "roles.planner.roster.tier1[0]" in result.output and "gpt-x" in result.output


def test_run_rejects_a_blank_task_before_contacting_temporal() -> None:
    """Invalid pipeline input is refused locally with exit 2."""
    result = runner.invoke(app, ["run", "   ", "--address", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert "task" in result.output


def test_force_rejects_an_unknown_state() -> None:
    """`failover force` names the states it accepts."""
    result = runner.invoke(app, ["force", "anthropic-us-east", "sideways"])
    assert result.exit_code == 2
    assert "open, closed or release" in result.output
