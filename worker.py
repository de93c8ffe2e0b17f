"""Run the agent-failover worker: ``python worker.py`` (the same as ``failover worker``).

An entry point only: the wiring (policy, HTTP client, stores, Temporal workers, health
monitor) lives in :mod:`agent_failover.service`. Configured by environment variables; see
the README's configuration reference.
"""

import sys

try:
    from agent_failover.service import run
except ModuleNotFoundError as exc:  # a checkout without `pip install -e .`
    sys.exit(
        f"cannot import the agent_failover package ({exc}).\n"
        "Install it first, from the repository root: pip install -e '.[dev]'"
    )

if __name__ == "__main__":
    run()
