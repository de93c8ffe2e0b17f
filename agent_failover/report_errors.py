"""Set-up errors as one line on the library path, as the ``failover`` CLI prints them.

A :class:`~agent_failover.resilience.setup_errors.SetupError` that ends a user's worker
or starter script (a bad policy, a namespace without the search attributes, Temporal or
Redis unreachable) is printed as ``error: <what is wrong and what to do>``, without a
traceback, unless the script runs with ``-v`` / ``--verbose`` or the root logger is at
``DEBUG``. :func:`run_and_exit <agent_failover.connect.run_and_exit>` does it for its
``main``; :func:`install_hook` (called by ``FailoverPlugin`` and ``connect_client``) does
it for a script that ends in a plain ``asyncio.run(main())``: it wraps ``sys.excepthook``
for our errors only, every other exception keeps its traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from types import TracebackType
from typing import NoReturn

from agent_failover.resilience.config import PolicyError
from agent_failover.resilience.setup_errors import SetupError

#: Exit codes, as the CLI's: 2 when the input (the policy) is wrong, 1 otherwise.
EXIT_BAD_INPUT = 2
EXIT_FAILED = 1

_installed = False


def verbose() -> bool:
    """Whether tracebacks are wanted: ``-v``/``--verbose`` in argv or logging at DEBUG."""
    argv = sys.argv[1:]
    return "-v" in argv or "--verbose" in argv or logging.getLogger().isEnabledFor(logging.DEBUG)


def report(exc: SetupError) -> int:
    """Print ``exc`` as ``error: ...`` on stderr (with its traceback when :func:`verbose`);
    returns the exit code for it."""
    if verbose():
        traceback.print_exception(exc)
    print(f"error: {exc}", file=sys.stderr, flush=True)
    return EXIT_BAD_INPUT if isinstance(exc, PolicyError) else EXIT_FAILED


def _hook(
    previous: object,
) -> object:
    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if isinstance(value, SetupError):
            report(value)
            exit_now(EXIT_FAILED)
        previous(kind, value, tb)  # type: ignore[operator]

    hook.__wrapped__ = previous  # type: ignore[attr-defined]
    return hook


def exit_now(code: int) -> NoReturn:
    """Leave with ``code`` (what Python gives an uncaught exception) without finalizing the
    interpreter: a process that used a Temporal client can abort in gRPC's threads while
    finalizing (``Fatal Python error: PyGILState_Release``), turning a one-line error into
    a crash report and exit code -6. :func:`~agent_failover.connect.run_and_exit` leaves the
    same way. Logging and the standard streams are flushed first."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def install_hook() -> None:
    """Print uncaught set-up errors as one line (idempotent; other exceptions untouched)."""
    global _installed
    if not _installed:
        sys.excepthook = _hook(sys.excepthook)  # type: ignore[assignment]
        _installed = True
