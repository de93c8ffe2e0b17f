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

Every handler also gets :class:`RedactSecrets`: credential-bearing query values (Gemini's
``?key=``, ``sig=``, ``X-Amz-Signature=``...), secret header values (``Authorization``,
``x-api-key``, ``x-goog-api-key``...), provider-key-shaped tokens and the values of the
environment variables the policy names as key sources (:func:`redact_policy_secrets`)
are replaced by ``<redacted>`` in each record's message, arguments and traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from agent_failover.providers.redact import redact_text

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
#: Literal secret values masked in every record (see :func:`redact_policy_secrets`).
_secret_values: set[str] = set()


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


class RedactSecrets(logging.Filter):
    """Mask credentials in a record before any handler formats it.

    The message is rendered (``msg % args``) and redacted once; a traceback is rendered
    into ``exc_text`` and redacted too, so the formatter prints the masked copy.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = tuple(_secret_values)
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to the handler to report
            return True
        clean = redact_text(message, secrets)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text, secrets)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info, secrets)
        return True


def redact_policy_secrets(policy: Any, env: Mapping[str, str] | None = None) -> int:
    """Mask in every log record the values of the env vars ``policy`` reads keys from.

    Those are each endpoint's ``api_key_env`` and ``headers_from_env`` variables; their
    current values (at least 8 characters) are added to the process-wide set
    :class:`RedactSecrets` replaces. Returns how many values are masked now.
    """
    env = os.environ if env is None else env
    for endpoint in policy.endpoints.values():
        names = [endpoint.api_key_env, *endpoint.headers_from_env.values()]
        _secret_values.update(v for n in names if n and (v := env.get(n, "").strip()))
    return len(_secret_values)


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
        handler.addFilter(RedactSecrets())
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
