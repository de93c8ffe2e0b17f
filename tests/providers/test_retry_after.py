"""Cool-down hints in headers: Retry-After (seconds, date, ms) and the vendor reset headers."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from agent_failover.providers.retry_after import (
    MAX_RETRY_AFTER_S,
    parse_go_duration,
    parse_retry_after,
)

NOW = 1_750_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("0s", 0.0),
        ("500us", 0.0005),
        ("", None),
        ("1x", None),
        ("s", None),
        ("1s junk", None),
    ],
)
def test_go_durations(value, seconds):
    """OpenAI reset durations parse; anything else is None."""
    assert parse_go_duration(value) == (pytest.approx(seconds) if seconds is not None else None)


def test_retry_after_seconds_and_date():
    """Retry-After is delta-seconds or an HTTP-date relative to ``now``."""
    assert parse_retry_after({"Retry-After": "12"}, now=NOW) == 12.0
    date = format_datetime(datetime.fromtimestamp(NOW + 30, tz=UTC), usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=NOW) == pytest.approx(30.0)
    assert parse_retry_after({"retry-after": date}, now=None) is None  # needs a clock


def test_retry_after_ms_wins():
    """retry-after-ms takes precedence over retry-after."""
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}, now=NOW) == 0.25


def test_retry_after_clamps():
    """Past dates clamp to 0 and absurd values to the maximum; garbage is ignored."""
    past = format_datetime(datetime.fromtimestamp(NOW - 60, tz=UTC), usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=NOW) == 0.0
    assert parse_retry_after({"retry-after": "1e12"}, now=NOW) == MAX_RETRY_AFTER_S
    assert parse_retry_after({"retry-after": "nan"}, now=NOW) is None
    assert parse_retry_after({"retry-after": "soon"}, now=NOW) is None


def test_openai_reset_headers_pick_the_exhausted_limit():
    """The reset of the limit whose remaining is 0 is used; else the longest."""
    h = {
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-reset-tokens": "6m0s",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-remaining-tokens": "5000",
    }
    assert parse_retry_after(h, now=NOW) == 1.0
    del h["x-ratelimit-remaining-requests"]
    assert parse_retry_after(h, now=NOW) == 360.0


def test_anthropic_reset_headers():
    """anthropic-ratelimit-*-reset RFC 3339 timestamps become seconds from now."""
    at = datetime.fromtimestamp(NOW + 42, tz=UTC).isoformat().replace("+00:00", "Z")
    h = {"anthropic-ratelimit-tokens-reset": at, "anthropic-ratelimit-tokens-remaining": "0"}
    assert parse_retry_after(h, now=NOW) == pytest.approx(42.0)
