"""``failover dev``: the local stack in the foreground until Ctrl-C or SIGTERM.

It prints where everything is and how to join it from another terminal (the same lines
``demo --serve`` prints), then waits. Either signal stops the worker, the stores, the
Temporal dev server and the simulator before the command exits 0.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from rich.console import Console

from agent_failover.cli.devstack import DevStack, print_left_out, start_stack
from agent_failover.cli.lifecycle import until_signalled


def print_join(console: Console, stack: DevStack, *, title: str) -> None:
    """The join block: UI link, simulator URL, Redis namespace, exact commands."""
    console.print(title, highlight=False)
    for line in stack.join.lines():
        # soft_wrap: long export lines stay one line, so they copy-paste as printed.
        console.print(line, markup=False, highlight=False, soft_wrap=True)


async def run_dev(
    console: Console,
    err: Console,
    port: int,
    ui_port: int,
    sim_port: int,
    policy: Path | None,
) -> int:
    """Run the stack until a signal; return the exit code (0: stopped as asked)."""

    async def main() -> None:
        with console.status("starting simulator, Temporal dev server, Redis and worker…"):
            stack = await start_stack(
                policy_path=policy, temporal_port=port, ui_port=ui_port, sim_port=sim_port
            )
        try:
            print_join(
                console,
                stack,
                title=f"failover dev: running (store {stack.deps.stores.backend}); "
                "Ctrl-C or SIGTERM stops everything",
            )
            print_left_out(console, stack)
            await asyncio.Event().wait()
        finally:
            with console.status("stopping worker, Temporal dev server, Redis and simulator…"):
                await stack.stop()

    _, signum = await until_signalled(main())
    if signum is not None:
        console.print(f"stopped on {signal.Signals(signum).name}: everything it started is down")
    return 0
