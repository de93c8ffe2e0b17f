"""``failover init [DIR]``: start a user project (:mod:`agent_failover.cli.init_project`).

It writes files and nothing else: no server, no test helper. :mod:`agent_failover.cli.main`
registers it on the app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agent_failover.cli.shared import console, guard

#: This module's commands; main lists them in the app's help order.
commands = typer.Typer()


@commands.command("init")
def init(
    directory: Annotated[
        Path, typer.Argument(help="Where to write the project (created if missing).")
    ] = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files the project would replace.")
    ] = False,
) -> None:
    """Write a minimal working project: policy, workflow, worker, starter and a test."""
    from agent_failover.cli.init_project import queue_name, write_project

    written = guard(lambda: write_project(directory, force=force))
    for path, lines in written:
        console.print(f"wrote {path} ({lines} lines)", highlight=False)
    console.print(
        f"task queue {queue_name(directory)}: next, read {directory / 'README.md'} "
        "(failover dev, then python worker.py and python starter.py)",
        highlight=False,
    )
