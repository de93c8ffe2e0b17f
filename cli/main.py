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

from agent_failover.cli import commands_config, commands_dev, commands_ops, commands_serve
from agent_failover.cli.shared import state

app = typer.Typer(
    help="Failover and graceful degradation for multi-agent LLM pipelines on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(commands_config.config_app, name="config")
app.add_typer(commands_ops.escalations_app, name="escalations")
#: `failover --help` lists the commands in this order, whichever module declares them.
HELP_ORDER = (
    "sim", "worker", "codec-server", "dev", "run", "status", "report", "qualify", "force",
    "resolve", "webhook-receiver", "demo", "drill", "chaos-proxy", "replay",
)  # fmt: skip
_declared = {
    info.name: info
    for group in (commands_ops, commands_serve, commands_config, commands_dev)
    for info in group.commands.registered_commands
}
app.registered_commands += [_declared[name] for name in HELP_ORDER]


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
