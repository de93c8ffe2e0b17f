"""``run_and_exit``: a client script's last line, exit codes as Python's own, streams flushed.

Each case runs in its own interpreter: the function ends the process with ``os._exit``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_SCRIPT = """
import asyncio, logging, sys
from agent_failover import run_and_exit

logging.basicConfig(stream=sys.stderr, format="%(message)s")

async def main(outcome):
    await asyncio.sleep(0)
    sys.stdout.write("partial line, no newline")  # only a flush gets it out
    logging.getLogger("x").warning("logged before exit")
    if outcome == "ok":
        return 42
    if outcome == "code":
        raise SystemExit(3)
    if outcome == "message":
        raise SystemExit("config missing: set FOO")
    if outcome == "interrupt":
        raise KeyboardInterrupt
    raise ValueError("boom in main")

def sync_main():
    print("sync ran")
    raise SystemExit(None)

if sys.argv[1] == "sync":
    run_and_exit(sync_main)
run_and_exit(main(sys.argv[1]))
print("never reached")
"""


def _run(arg: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT), arg],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("arg", "code", "in_err"),
    [
        ("ok", 0, None),
        ("code", 3, None),
        ("message", 1, "config missing: set FOO"),
        ("interrupt", 130, None),
        ("raise", 1, "ValueError: boom in main"),
    ],
)
def test_exit_code_and_flushed_output(arg: str, code: int, in_err: str | None) -> None:
    proc = _run(arg)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "partial line, no newline"  # flushed, and nothing ran after it
    assert "logged before exit" in proc.stderr
    if in_err is not None:
        assert in_err in proc.stderr


def test_a_plain_callable_runs_too() -> None:
    proc = _run("sync")
    assert (proc.returncode, proc.stdout) == (0, "sync ran\n")
