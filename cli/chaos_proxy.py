"""``failover chaos-proxy``: parse the options, load the timeline, serve until stopped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError


def parse_start_at(value: str | None) -> float | None:
    """``--start-at``: epoch seconds or an ISO-8601 time (with a zone, or local)."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise CliError(
            f"--start-at {value!r}: give epoch seconds or an ISO-8601 time "
            "such as 2026-11-30T14:00:00Z",
            EXIT_BAD_INPUT,
        ) from None


def check_upstream(url: str) -> str:
    """The upstream must be an absolute http(s) URL (no query: paths are appended)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(
            f"--upstream {url!r}: give an absolute URL such as https://api.anthropic.com",
            EXIT_BAD_INPUT,
        )
    if parts.query or parts.fragment:
        raise CliError(
            "--upstream must not carry a query or fragment: the proxy appends each "
            "request's own path and query",
            EXIT_BAD_INPUT,
        )
    return url


def run_chaos_proxy(
    console: Console,
    *,
    upstream: str,
    scenario_path: Path | None,
    host: str,
    port: int,
    endpoint: str | None,
    organisation: str | None,
    region: str | None,
    provider: str | None,
    seed: int,
    start_at: str | None,
    quiet: bool,
    record: Path | None = None,
) -> None:
    """Validate everything, then serve in the foreground until SIGINT/SIGTERM
    (``record``: every exchange also goes, redacted, to a cassette in that folder)."""
    from agent_failover.testing.chaos_proxy import ProxyIdentity, serve_chaos_proxy

    check_upstream(upstream)
    if scenario_path is None and record is None:
        raise CliError("give --scenario FILE, --record DIR, or both", EXIT_BAD_INPUT)
    scenario = _checked_scenario(scenario_path, provider)
    recorder = _recorder(record, upstream, endpoint, console)
    for name in ("httpx", "httpcore"):
        # Their request lines carry the full upstream URL (Gemini's ?key=) even with -v.
        logging.getLogger(name).setLevel(logging.WARNING)
    if not quiet:
        # One line per request (method, path with keys redacted, status, faults).
        # (-v lowers the root to DEBUG, which adds the forwarded headers, redacted.)
        logging.getLogger().setLevel(min(logging.getLogger().level, logging.INFO))
    identity = ProxyIdentity(endpoint=endpoint, organisation=organisation, region=region)
    announce = lambda line: console.print(line, markup=False, highlight=False)  # noqa: E731
    try:
        asyncio.run(
            serve_chaos_proxy(
                upstream,
                scenario,
                announce=announce,
                host=host,
                port=port,
                identity=identity,
                provider=provider,
                seed=seed,
                start_at=parse_start_at(start_at),
                recorder=recorder,
            )
        )
    finally:
        _close(recorder, announce)


def _close(recorder: Any, announce: Callable[[str], None]) -> None:
    if recorder is not None:
        recorder.close()
        announce(f"recorded {recorder.count} exchange(s) to {recorder.path}")


def _recorder(folder: Path | None, upstream: str, endpoint: str | None, console: Console):
    """The cassette recorder for ``--record`` (None without it); a folder that cannot be
    written is one CLI error."""
    if folder is None:
        return None
    from agent_failover.testing.chaos_proxy.server import safe_origin
    from agent_failover.testing.replay.record import Recorder

    if folder.exists() and not folder.is_dir():
        raise CliError(f"--record {folder}: not a folder", EXIT_BAD_INPUT)
    try:
        recorder = Recorder(folder, upstream=safe_origin(upstream), endpoint=endpoint)
    except OSError as exc:
        raise CliError(
            f"--record {folder}: cannot write there ({exc.strerror})", EXIT_BAD_INPUT
        ) from None
    console.print(f"recording to {recorder.path} (redacted)", markup=False, highlight=False)
    return recorder


def _checked_scenario(path: Path | None, provider: str | None):
    """The timeline at ``path`` (none: a timeline without faults), once ``--provider``
    (if given) names a wire we speak; a bad file is one CLI error listing its problems."""
    from agent_failover.testing.chaos_proxy import load_proxy_scenario, pass_through_scenario
    from agent_failover.testing.chaos_proxy.scenario import PROXY_WIRES

    if provider is not None and provider not in PROXY_WIRES:
        raise CliError(
            f"--provider {provider!r}: use one of {', '.join(PROXY_WIRES)}", EXIT_BAD_INPUT
        )
    if path is None:
        return pass_through_scenario()
    try:
        return load_proxy_scenario(path)
    except ValueError as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        raise CliError("invalid scenario: " + "\n  ".join(lines), EXIT_BAD_INPUT) from None
