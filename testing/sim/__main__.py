"""``python -m sim --port N --config FILE [--scenario FILE]``: run the simulator in the foreground.

Serves every endpoint of the config (on 127.0.0.1 unless --host) until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse

from agent_failover.testing.sim.server import run_simulator_blocking


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until Ctrl-C / SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    parser.add_argument("--port", type=int, default=8400, help="port (0: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--config", default=None, help="simulator YAML (default config/sim.yaml)")
    parser.add_argument("--scenario", default=None, help="fault timeline YAML to load at start")
    args = parser.parse_args(argv)
    run_simulator_blocking(args.port, args.config, args.scenario, host=args.host)


if __name__ == "__main__":
    main()
