"""Logging for the entry points (worker, CLI): quiet by default, detail on request.

Library code only logs; :func:`configure_logging` decides what reaches the terminal.
By default that is WARNING and above from our code (breaker transitions, Redis lost and
back, policy warnings), without the per-request ``HTTP Request: POST ...`` INFO lines of
httpx/httpcore, and without the Temporal SDK's per-poll noise. ``verbose`` (``-v`` on the
CLI, ``LOG_LEVEL=DEBUG`` for the worker) turns all of it back on.

The Temporal core (Rust) logs straight to stderr unless told otherwise; here its lines
are forwarded into Python logging (logger ``temporalio.core``), so the same levels apply
to them. A few messages known to be benign are demoted to DEBUG, notably the core's
"Activity not found on completion", which is what a hedge loser that finished after its
cancellation produces.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import Any

#: Third-party loggers that log every request or poll at INFO.
CHATTY_LOGGERS = ("httpx", "httpcore", "aiohttp.access")
#: Where the Temporal core's own log lines go.
CORE_LOGGER = "temporalio.core"
#: Messages that describe an expected event, shown only when verbose.
BENIGN_MESSAGES = (
    # A cancelled activity (a hedge loser) that completed anyway: nothing is wrong.
    "Activity not found on completion",
)

_core_attempted = False


class StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each record.

    A handler bound to the stream of the moment breaks once that stream is swapped and
    closed (a test runner capturing output, a daemon redirecting it).
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


class DemoteBenign(logging.Filter):
    """Turn the known-benign records into DEBUG ones (dropped unless DEBUG is on)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG and any(
            m in record.getMessage() for m in BENIGN_MESSAGES
        ):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


def forward_core_logs(metrics: Any = None) -> bool:
    """Send the Temporal core's logs through Python logging (tried once per process).

    Must run before the first Temporal client or worker is created; returns False if
    it already ran or the default runtime was already set (then the core keeps logging
    on its own). ``metrics`` (a ``temporalio.runtime.MetricBuffer``) also collects the
    SDK's own metrics for :func:`agent_failover.telemetry.sdk.export_sdk_metrics`.
    """
    global _core_attempted
    if _core_attempted:
        return False
    _core_attempted = True
    from temporalio.runtime import (
        LogForwardingConfig,
        LoggingConfig,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )

    runtime = Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(
                filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                forwarding=LogForwardingConfig(logger=logging.getLogger(CORE_LOGGER)),
            ),
            metrics=metrics,
        )
    )
    try:
        Runtime.set_default(runtime, error_if_already_set=True)
    except RuntimeError:
        return False
    return True


def configure_logging(
    level: int | str = logging.WARNING,
    *,
    verbose: bool = False,
    handlers: Iterable[logging.Handler] | None = None,
    fmt: str = "%(levelname)s %(name)s: %(message)s",
) -> None:
    """Install one handler on the root logger at ``level`` (DEBUG when ``verbose``).

    Safe to call more than once: the last call wins (``force=True``).
    """
    resolved = logging.DEBUG if verbose else _level(level)
    verbose = verbose or resolved <= logging.DEBUG  # LOG_LEVEL=DEBUG means everything
    logging.basicConfig(
        level=resolved,
        format=fmt,
        handlers=list(handlers) if handlers is not None else [StderrHandler()],
        force=True,
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(DemoteBenign())
    for name in CHATTY_LOGGERS:
        # Above the root level unless asked: one line per HTTP request drowns the rest.
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)


def _level(level: int | str) -> int:
    if isinstance(level, int):
        return level
    value = logging.getLevelName(level.strip().upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown log level {level!r} (use DEBUG, INFO, WARNING or ERROR)")
    return value
