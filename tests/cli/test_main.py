"""The ``failover`` CLI: help on every command, policy checks with exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_failover.cli.main import app
from agent_failover.config import DEFAULT_POLICY_PATH

ROOT = Path(__file__).resolve().parents[2]

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


def _help(*args: str) -> str:
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "failover")
    proc = subprocess.run([exe, *args, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def test_top_level_help_groups_the_commands() -> None:
    """`failover --help` (a real process) shows the operate / develop / evaluate panels,
    each command in one of them, and no flag with a `<bool>` type."""
    from agent_failover.cli.main import HELP_PANELS

    text = _help()
    for panel, names in HELP_PANELS.items():
        assert f"─ {panel} ─" in text
        section = text.split(f"─ {panel} ─", 1)[1].split("╰", 1)[0]
        for name in names:
            assert f"│ {name} " in section, (panel, name)
    assert "<bool>" not in text


def test_flags_render_without_a_type() -> None:
    """A two-sided flag shows as --flag / --no-flag, a one-sided one alone: never `<bool>`."""
    for args in (("run",), ("status",), ("demo",), ("escalations", "show")):
        text = _help(*args)
        assert "<bool>" not in text, args
    assert "--no-suppress-degra" in _help("run")


def test_worker_help_names_its_environment() -> None:
    """`failover worker --help` lists the variables it reads; each is read by our code."""
    from agent_failover.cli.commands_serve import WORKER_ENVIRONMENT

    text = " ".join(_help("worker").split())
    sources = "".join(
        p.read_text()
        for d in ("agent_failover", "telemetry", "stores", "activities")
        for p in ROOT.joinpath(d).glob("*.py")
    )
    for names, _meaning in WORKER_ENVIRONMENT:
        for name in (n.strip() for n in names.split(",")):
            assert name in text, name
            assert name.rstrip("*") in sources, name
