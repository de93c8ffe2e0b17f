"""Where a running local stack says how to reach it: ``.failover/stack.json``.

``failover dev`` and ``demo`` write the file (:func:`agent_failover.cli.devstack.write_stack_file`);
every other command reads it here to find Temporal, the task queue and the policy when no
flag or variable names them. The directory is ``FAILOVER_STATE_DIR`` (default
``.failover``), read at each call so tests and tools can redirect it. Reading needs
nothing of the dev stack itself, so production commands use it freely.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

#: The state directory unless ``FAILOVER_STATE_DIR`` names another.
DEFAULT_STATE_DIR = ".failover"


def state_dir() -> Path:
    """``FAILOVER_STATE_DIR`` (read at each call, so tests and tools can redirect it)."""
    return Path(os.environ.get("FAILOVER_STATE_DIR", DEFAULT_STATE_DIR))


def stack_file() -> Path:
    return state_dir() / "stack.json"


def temporal_db() -> Path:
    return state_dir() / "temporal.db"


def read_stack_file() -> dict[str, str] | None:
    """What a running ``failover dev`` / ``demo`` wrote about itself, if it still runs."""
    try:
        data = json.loads(stack_file().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    pid = data.get("pid")
    if isinstance(pid, int) and not _alive(pid):
        return None  # left behind by a stack that was killed: ignore it
    return data


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ui_url(address: str, ui_port: int | None = None) -> str | None:
    """Best guess at the Web UI for a Temporal address (dev server: gRPC port + 1000)."""
    env = os.environ.get("TEMPORAL_UI_URL")
    if env:
        return env.rstrip("/")
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return None
    return f"http://{host or '127.0.0.1'}:{ui_port or int(port) + 1000}"
