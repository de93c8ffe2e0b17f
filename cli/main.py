"""``failover``: the command line of agent-failover.

Commands talk to a Temporal cluster at ``--address`` / ``TEMPORAL_ADDRESS``; when a
``failover dev`` (or ``demo``) stack is running they find it through
``.failover/stack.json``. Every failure ends in one line on stderr saying what failed
and what to do next (exit 1; exit 2 for bad input), never a traceback (``-v`` shows it);
``dev`` and ``demo`` stop everything they started on Ctrl-C and SIGTERM alike.

This module is the table of contents: the app, its ``-v`` callback, and each command
registered from the module of its group — :mod:`~agent_failover.cli.commands_ops`
(operating a deployment), :mod:`~agent_failover.cli.commands_serve` (its processes),
:mod:`~agent_failover.cli.commands_config` (policy and roster checks) and
:mod:`~agent_failover.cli.commands_dev` (local tries: these alone load the test helpers,
and only when they run).
"""

from __future__ import annotations

from typing import Annotated

import typer

from agent_failover.cli import (
    commands_config,
    commands_dev,
    commands_init,
    commands_ops,
    commands_serve,
    commands_sim,
)
from agent_failover.cli.shared import flags_without_type, state

flags_without_type()
app = typer.Typer(
    help="Failover and graceful degradation for multi-agent LLM pipelines on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
OPERATE, DEVELOP, EVALUATE = "Operate a deployment", "Develop locally", "Evaluate and rehearse"
#: `failover --help` lists the commands by panel, in this order, whichever module declares
#: them (groups of subcommands follow the commands of their panel).
HELP_PANELS = {
    OPERATE: ("worker", "codec-server", "status", "force", "run", "resolve", "report"),
    DEVELOP: ("init", "dev", "demo", "webhook-receiver"),
    EVALUATE: ("qualify", "drill", "chaos-proxy", "replay"),
}
HELP_ORDER = tuple(name for names in HELP_PANELS.values() for name in names)
_declared = {
    info.name: info
    for group in (commands_ops, commands_serve, commands_config, commands_dev, commands_init)
    for info in group.commands.registered_commands
}


def short_help(doc: str | None) -> str:
    """A command's line in the list: the first sentence of its docstring, on one line."""
    text = " ".join((doc or "").split("\n\n")[0].split())
    head, dot, _ = text.partition(". ")
    return head + ("." if dot else "")


for _panel, _names in HELP_PANELS.items():
    for _name in _names:
        _info = _declared[_name]
        _info.rich_help_panel = _panel
        _info.short_help = _info.short_help or short_help(_info.callback.__doc__)
        app.registered_commands.append(_info)
app.add_typer(commands_ops.escalations_app, name="escalations", rich_help_panel=OPERATE)
app.add_typer(commands_sim.sim_app, name="sim", rich_help_panel=DEVELOP)
app.add_typer(commands_config.config_app, name="config", rich_help_panel=DEVELOP)


@app.callback()
def _setup(
    ctx: typer.Context,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Show details: every log line, HTTP request and traceback."
        ),
    ] = False,
) -> None:
    """Quiet by default: warnings only (breaker transitions, Redis lost); -v for everything."""
    import logging

    from agent_failover.logs import configure_logging, forward_core_logs

    state.verbose = verbose
    if ctx.invoked_subcommand == "worker":
        # The worker sets up its own logging and Temporal runtime (with the SDK metrics
        # buffer when metrics are exported): the runtime can be set once per process.
        return
    configure_logging(logging.WARNING, verbose=verbose, fmt="%(levelname)s %(message)s")
    forward_core_logs()
    for name in ("temporalio.workflow", "temporalio.activity"):
        # In-process workers (dev, demo): escalations and failed attempts are what the
        # tables and the progress line show; their log lines only repeat them.
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.ERROR)


def main() -> None:
    """The ``failover`` console script: the app, then an exit that skips finalization
    (a command that used a Temporal client can otherwise abort at exit, see
    :func:`agent_failover.connect.run_and_exit`)."""
    from agent_failover.connect import run_and_exit

    run_and_exit(app)


if __name__ == "__main__":  # pragma: no cover
    main()
