"""Every CLI failure as one clear line: what failed and what to do next.

Commands raise :class:`CliError` for the states they expect (no worker, unknown run,
refused decision). :func:`describe` turns anything else that reaches the top into one
line as well: Temporal unreachable or gone mid-command, RPC errors by status, failed
workflows, refused updates, Redis down, busy ports, pydantic validation errors (one
``field: message`` line per problem, no URLs). :func:`guarded` is what every command
runs its body through: a known failure prints its line and exits 1 (2 for bad input),
Ctrl-C exits 130 without a traceback, and an unexpected exception still prints one line
(the traceback only with ``-v``).
"""

from __future__ import annotations

import errno
import logging
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn, TypeVar

from pydantic import ValidationError
from rich.console import Console

T = TypeVar("T")

#: Exit codes: 1 = the operation failed, 2 = the input was wrong (usage, policy, fields).
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

START_STACK_HINT = "start a local stack with `failover dev`, or pass --address / TEMPORAL_ADDRESS"


class CliError(Exception):
    """An expected failure, already phrased for the user (one line unless it lists fields)."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def validation_lines(exc: ValidationError, prefix: str = "") -> list[str]:
    """``field: message`` per problem, without pydantic's URLs and type tags."""
    lines = []
    for e in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"] if not (isinstance(p, str) and "[" in p))
        field = f"{prefix}{loc}" if loc else (prefix.rstrip(".") or "input")
        lines.append(f"{field}: {e['msg'].removeprefix('Value error, ')}")
    return lines


def describe(exc: BaseException, *, address: str | None = None) -> str:
    """One line for an exception that escaped a command (never a traceback)."""
    from temporalio.client import (
        RPCTimeoutOrCancelledError,
        WorkflowFailureError,
        WorkflowQueryFailedError,
        WorkflowUpdateFailedError,
    )
    from temporalio.service import RPCError, RPCStatusCode

    where = f" at {address}" if address else ""
    if isinstance(exc, RPCError) and exc.status is RPCStatusCode.UNAVAILABLE:
        return f"lost the connection to Temporal{where} ({_first(exc.message)}): {START_STACK_HINT}"
    if isinstance(exc, RPCError | RPCTimeoutOrCancelledError) and _is_timeout(exc):
        return f"Temporal{where} did not answer in time: is the server overloaded or gone?"
    if isinstance(exc, RPCError):
        status = exc.status.name if exc.status else "?"
        return f"Temporal refused the request ({status}): {_first(exc.message)}"
    if isinstance(exc, WorkflowUpdateFailedError | WorkflowFailureError):
        return f"{_what(exc)}: {_cause(exc)}"
    if isinstance(exc, WorkflowQueryFailedError):
        return f"the workflow could not answer the query: {_first(exc.message)}"
    if isinstance(exc, RuntimeError) and "client connect" in str(exc).lower():
        return f"cannot reach Temporal{where}: {START_STACK_HINT}"
    return _describe_local(exc)


def _describe_local(exc: BaseException) -> str:
    """Failures that are not Temporal's: Redis, ports, files, validation."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    from agent_failover.resilience.setup_errors import SetupError
    from agent_failover.stores.embedded_redis import EmbeddedRedisError

    if isinstance(exc, SetupError) and "\n" not in str(exc):
        return str(exc)  # already one line saying what is wrong and what to do

    if isinstance(exc, (*_dev_server_errors(), EmbeddedRedisError)):
        return _first(str(exc))  # already phrased for the user
    if isinstance(exc, ValidationError):
        return "; ".join(validation_lines(exc))
    if isinstance(exc, RedisConnectionError):
        return f"cannot reach Redis: {_first(str(exc))} (set REDIS_URL, or start redis-server)"
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return f"a port is already in use ({_first(str(exc))}): stop what holds it or pick another"
    if isinstance(exc, OSError):
        target = f" {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or type(exc).__name__}{target}"
    return f"unexpected error: {type(exc).__name__}: {_first(str(exc))}"


def _dev_server_errors() -> tuple[type[BaseException], ...]:
    """The dev server's own errors (phrased for the user), if a dev command loaded them.

    Looked up, never imported: production commands do not load the test helpers, and
    where they are not loaded none of their errors can have been raised.
    """
    servers = sys.modules.get("agent_failover.testing.servers")
    return (servers.DevServerError, servers.MissingBinary) if servers is not None else ()


def _is_timeout(exc: BaseException) -> bool:
    from temporalio.client import RPCTimeoutOrCancelledError
    from temporalio.service import RPCError, RPCStatusCode

    if isinstance(exc, RPCTimeoutOrCancelledError):
        return True
    return isinstance(exc, RPCError) and exc.status in (
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.CANCELLED,
    )


def _what(exc: BaseException) -> str:
    from temporalio.client import WorkflowUpdateFailedError

    return "refused" if isinstance(exc, WorkflowUpdateFailedError) else "the workflow failed"


def _cause(exc: BaseException) -> str:
    """The innermost useful message: an ApplicationError's, with its type when it has one."""
    from temporalio.exceptions import ApplicationError, FailureError

    cause = getattr(exc, "cause", None)
    while isinstance(cause, FailureError) and not isinstance(cause, ApplicationError):
        if cause.cause is None:
            break
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        kind = f"{cause.type}: " if cause.type and cause.type != "ValueError" else ""
        return kind + _first(cause.message)
    return _first(str(cause or exc))


def _first(text: str, limit: int = 300) -> str:
    """The first line of ``text``, shortened: one line means one line."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def guarded(
    body: Callable[[], T], err: Console, *, verbose: bool = False, address: str | None = None
) -> T:
    """Run ``body``; turn every failure into one line on ``err`` and an exit code."""
    import typer

    try:
        return body()
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except CliError as exc:
        _fail(err, exc.message, exc.code)
    except KeyboardInterrupt:
        _fail(err, "interrupted", EXIT_INTERRUPTED)
    except Exception as exc:
        if verbose:
            err.print(traceback.format_exc(), markup=False, highlight=False)
        logging.getLogger(__name__).debug("command failed", exc_info=True)
        _fail(err, describe(exc, address=address), EXIT_FAILED)


def _fail(err: Console, message: str, code: int) -> NoReturn:
    import typer

    err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)
