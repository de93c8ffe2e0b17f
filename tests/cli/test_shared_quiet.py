"""Quiet by default: no per-request HTTP lines, benign core messages demoted; -v (or
LOG_LEVEL=DEBUG) brings the detail back."""

from __future__ import annotations

import logging

import pytest

from agent_failover.logs import DemoteBenign, configure_logging


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    logging.getLogger("agent_failover").setLevel(logging.NOTSET)
    yield
    root.handlers[:] = saved[1]
    root.setLevel(saved[0])
    for name in ("httpx", "httpcore", "agent_failover"):
        logging.getLogger(name).setLevel(logging.NOTSET)


def _emit(capfd, name: str, level: int, msg: str) -> str:
    logging.getLogger(name).log(level, msg)
    return capfd.readouterr().err


def test_httpx_request_lines_hidden_even_at_info(capfd) -> None:
    """The worker runs at INFO: httpx's per-request INFO lines still stay out."""
    configure_logging("INFO")
    assert _emit(capfd, "httpx", logging.INFO, "HTTP Request: POST x") == ""
    assert "worker running" in _emit(capfd, "agent_failover.worker", logging.INFO, "worker running")


def test_verbose_restores_http_lines(capfd) -> None:
    configure_logging("WARNING", verbose=True)
    assert "HTTP Request: POST x" in _emit(capfd, "httpx", logging.INFO, "HTTP Request: POST x")


def test_benign_core_message_is_demoted(capfd) -> None:
    """A hedge loser that completed after its cancellation is not a warning."""
    configure_logging("INFO")
    msg = "Activity not found on completion. This may happen if the activity has already been"
    assert _emit(capfd, "temporalio.core", logging.WARNING, msg) == ""
    assert "other" in _emit(capfd, "temporalio.core", logging.WARNING, "other")
    configure_logging("INFO", verbose=True)
    assert "DEBUG" in _emit(capfd, "temporalio.core", logging.WARNING, msg)


def test_demote_filter_leaves_other_records_alone() -> None:
    rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", None, None)
    assert DemoteBenign().filter(rec) and rec.levelno == logging.ERROR


def test_unknown_level_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown log level 'LOUD'"):
        configure_logging("LOUD")
