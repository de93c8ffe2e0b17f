"""Cool-down hints in response headers: how long a route asks to be left alone.

Read from ``retry-after-ms``, ``retry-after`` (seconds or HTTP-date, relative to the
``now`` argument), OpenAI's ``x-ratelimit-reset-*`` durations and Anthropic's
``anthropic-ratelimit-*-reset`` timestamps. Pure and total: an unreadable value is no
hint, a negative one is 0, an absurd one is :data:`MAX_RETRY_AFTER_S`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from agent_failover.providers.error_body import lower_headers

#: Longest cool-down any header may ask for; a far-future date is a bug, not a plan.
MAX_RETRY_AFTER_S = 24 * 3600.0

_GO_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(value: str) -> float | None:
    """Seconds in an OpenAI reset header: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"``."""
    text = value.strip()
    if not text:
        return None
    pos = 0
    total = 0.0
    for match in _GO_DURATION_RE.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _GO_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        return None
    return total


def _seconds_until(value: str, now: float | None) -> float | None:
    """Seconds from ``now`` to an HTTP-date or an RFC 3339 timestamp."""
    if now is None:
        return None
    text = value.strip()
    when: datetime | None = None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # HTTP-dates are GMT by definition
    try:
        return when.timestamp() - now
    except (OverflowError, OSError, ValueError):
        return None


def _finite_float(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def clamp(seconds: float | None) -> float | None:
    """``seconds`` within 0 .. :data:`MAX_RETRY_AFTER_S` (``None`` when not finite)."""
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None) -> float | None:
    """Seconds to wait before this route may be tried again, from response headers.

    Precedence: ``retry-after-ms``, then ``retry-after`` (delta-seconds or HTTP-date),
    then the vendor reset headers. Of the vendor resets, the one whose ``remaining``
    counter is 0 wins (that is the limit actually hit); when none is known to be 0, the
    longest one (the conservative choice). Negative values clamp to 0, absurd ones to
    :data:`MAX_RETRY_AFTER_S`. ``now`` (epoch seconds) is needed only for dates.
    """
    h = lower_headers(headers)
    if "retry-after-ms" in h:
        ms = _finite_float(h["retry-after-ms"])
        if ms is not None:
            return clamp(ms / 1000.0)
    if "retry-after" in h:
        raw = h["retry-after"]
        seconds = _finite_float(raw)
        if seconds is None:
            seconds = _seconds_until(raw, now)
        if seconds is not None:
            return clamp(seconds)
    hit: list[float] = []
    known: list[float] = []
    _vendor_resets(h, now, hit, known)
    chosen = hit or known
    return clamp(max(chosen)) if chosen else None


def _vendor_resets(
    h: dict[str, str], now: float | None, hit: list[float], known: list[float]
) -> None:
    """Collect OpenAI's and Anthropic's reset times: all into ``known``, exhausted into ``hit``."""
    for kind in ("requests", "tokens"):
        reset = h.get(f"x-ratelimit-reset-{kind}")
        if reset is None:
            continue
        seconds = parse_go_duration(reset)
        if seconds is None:
            seconds = _finite_float(reset)
        if seconds is None:
            continue
        known.append(seconds)
        if h.get(f"x-ratelimit-remaining-{kind}", "").strip() == "0":
            hit.append(seconds)
    for kind in ("requests", "tokens", "input-tokens", "output-tokens"):
        reset = h.get(f"anthropic-ratelimit-{kind}-reset")
        if reset is None:
            continue
        seconds = _seconds_until(reset, now)
        if seconds is None:
            continue
        known.append(seconds)
        if h.get(f"anthropic-ratelimit-{kind}-remaining", "").strip() == "0":
            hit.append(seconds)
