"""Run the agent-failover worker: ``python worker.py`` (the same as ``failover worker``).

An entry point only: the wiring (policy, HTTP client, stores, Temporal workers, health
monitor) lives in :mod:`agent_failover.service`. Configured by environment variables; see
the README's configuration reference.
"""

from agent_failover.service import run

if __name__ == "__main__":
    run()
