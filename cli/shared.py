"""What every ``failover`` command shares: the consoles, ``-v``, the error guard, the
``--address`` / ``--task-queue`` options and how they resolve.

An option left out resolves the way the whole CLI does: the flag, else the environment
(``TEMPORAL_ADDRESS`` or a Temporal profile, ``FAILOVER_TASK_QUEUE``), else the running
``failover dev`` stack (``.failover/stack.json``), else the defaults. Nothing here loads
the dev stack or the test helpers: production commands import it.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError, guarded

T = TypeVar("T")

# Tables are wide; when output is piped (CI logs, files) do not squeeze them to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


class _State:
    verbose = False


#: Set by the app's callback from ``-v`` before any command runs.
state = _State()


def flags_without_type() -> None:
    """Help shows a boolean flag as ``--flag`` (or ``--flag/--no-flag``), not ``--flag <bool>``.

    Typer 0.29 prints a type column for every option, flags included (even ``--help
    <bool>``), which reads as if the flag took a value. Flags take none, so their type
    column is left empty; every other option keeps its ``<int>``, ``<str>``... Idempotent.
    """
    from typer.core import TyperOption

    if getattr(TyperOption.display_type_rich, "_flags_without_type", False):
        return
    original = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: typer.Context) -> str | None:
        return None if self.is_flag else original(self, ctx)

    display_type_rich._flags_without_type = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


def guard(body: Callable[[], T], address: str | None = None) -> T:
    """Run a command's body: a failure becomes its one line and exit code (see errors)."""
    return guarded(body, err, verbose=state.verbose, address=address)


@contextmanager
def port_in_use_said(port: int) -> Iterator[None]:
    """An address-in-use error as the one-line CLI error naming ``port``."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CliError(
                f"port {port} is already in use: stop what holds it or pass --port"
            ) from None
        raise


AddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="Temporal frontend host:port (default: TEMPORAL_ADDRESS, "
        "then the running `failover dev` stack, then 127.0.0.1:7233).",
    ),
]
TaskQueueOpt = Annotated[
    str | None,
    typer.Option(
        "--task-queue",
        help="The deployment's workflow task queue, as its worker's (default: "
        "FAILOVER_TASK_QUEUE, then the running `failover dev` stack's, then agent-failover; "
        "status and force then take the only running health monitor's).",
    ),
]


def temporal_address(address: str | None) -> str | None:
    """--address, else TEMPORAL_ADDRESS / the profile, else a running `failover dev` stack."""
    if address:
        return address
    from agent_failover.connect import connect_config

    if os.environ.get("TEMPORAL_ADDRESS") or connect_config().get("api_key"):
        return None  # envconfig has it (and its TLS / API key settings)
    from agent_failover.cli.stackfile import read_stack_file

    stack = read_stack_file()
    return stack["temporal_address"] if stack else None


def shown_address(address: str | None) -> str:
    """The address a command talks to, for its messages."""
    from agent_failover.connect import connect_config

    return temporal_address(address) or connect_config()["target_host"]


def task_queue_for(task_queue: str | None) -> str:
    """--task-queue, else FAILOVER_TASK_QUEUE, else the dev stack's, else agent-failover."""
    return task_queue_named(task_queue)[0]


def task_queue_named(task_queue: str | None) -> tuple[str, bool]:
    """:func:`task_queue_for` and whether something named it (False: the default)."""
    if task_queue:
        return task_queue, True
    if os.environ.get("FAILOVER_TASK_QUEUE"):
        return os.environ["FAILOVER_TASK_QUEUE"], True
    from agent_failover.cli.stackfile import read_stack_file

    stack = read_stack_file() or {}
    if stack.get("task_queue"):
        return stack["task_queue"], True
    return "agent-failover", False


async def connect(address: str | None):
    """A client for ``address`` (resolved as above), or the CLI error saying what to do."""
    from agent_failover.codec import CodecConfigError
    from agent_failover.connect import connect_client

    try:
        return await connect_client(temporal_address(address))
    except CodecConfigError as exc:
        raise CliError(f"invalid payload codec settings: {exc}", EXIT_BAD_INPUT) from None
    except RuntimeError:
        raise CliError(
            f"cannot reach Temporal at {shown_address(address)}: start a local stack with "
            "`failover dev`, or pass --address / set TEMPORAL_ADDRESS"
        ) from None
