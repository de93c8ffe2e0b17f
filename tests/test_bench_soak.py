"""``bench/soak_figures.py``: the soak's figures (the soak itself runs for minutes)."""

from __future__ import annotations

import pytest

from tests.bench_modules import load_bench

soak = load_bench("soak_figures")


def test_keys_are_grouped_by_route_and_kind_without_bucket_numbers() -> None:
    ns = "soak-1"
    assert soak.key_kind("soak-1:h:{openai-us}:s:1700000000", ns) == ("route:openai-us", "s")
    assert soak.key_kind("soak-1:h:{openai-us}:q:planner", ns) == ("route:openai-us", "q:planner")
    assert soak.key_kind("soak-1:h:{a}:b", ns) == ("route:a", "b")
    assert soak.key_kind("soak-1:rb:{endpoint:a}", ns) == ("rb", "rb")
    assert soak.key_kind("soak-1:cache:abc:def", ns) == ("cache", "cache")
    assert soak.key_kind("soak-1:sla:planner", ns) == ("sla", "sla")


def test_slope_is_taken_over_the_last_half_per_thousand_pipelines() -> None:
    # Flat for the first half, then +2 MB per 100 pipelines (20 MB per 1,000), 1 a minute.
    samples = [
        {
            "minute": float(m),
            "pipelines": 100 * m,
            "in_flight": 5,
            "rss_mb": 100.0 + max(0, m - 5) * 2.0,
        }
        for m in range(11)
    ]
    got = soak.rss_figures(samples)
    assert got["slope_window_minutes"] == [5.0, 10.0]
    assert got["slope_mb_per_1000_pipelines"] == pytest.approx(20.0)
    assert got["slope_mb_per_minute"] == pytest.approx(2.0)
    assert (got["first_mb"], got["last_mb"], got["max_mb"]) == (100.0, 110.0, 110.0)


def test_slope_needs_two_distinct_points() -> None:
    assert soak.slope([1.0], [2.0]) is None
    assert soak.slope([1.0, 1.0], [2.0, 3.0]) is None


def test_traceback_ends_name_the_exception() -> None:
    lines = [
        "WARNING temporalio.activity: Completing activity as failed",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in f',
        "    await g()",
        "asyncio.exceptions.CancelledError: Activity cancelled",
        "INFO next line",
    ]
    assert soak.traceback_ends(lines) == ["asyncio.exceptions.CancelledError: Activity cancelled"]


def test_growth_held_by_pipelines_in_flight_is_not_counted_at_equal_load() -> None:
    # RSS is 0.5 MB per pipeline in flight, and in flight rises with the pipelines run: the
    # plain slope sees growth, the slope at equal load none.
    samples = [
        {"minute": float(m), "pipelines": 100 * m, "in_flight": 10 * m + (m % 3), "rss_mb": 0.0}
        for m in range(12)
    ]
    for s in samples:
        s["rss_mb"] = 100.0 + 0.5 * s["in_flight"]
    got = soak.rss_figures(samples)
    assert got["slope_mb_per_1000_pipelines"] > 40
    assert got["slope_mb_per_1000_pipelines_at_equal_in_flight"] == pytest.approx(0.0, abs=1e-6)
    assert got["in_flight_max"] == samples[-1]["in_flight"]


def test_rss_split_slopes_tell_heap_growth_from_mapped_code() -> None:
    # The heap is flat; mapped files grow 1 MB per 100 pipelines (code paged in late).
    samples = [
        {
            "minute": float(m),
            "pipelines": 100 * m,
            "in_flight": 5,
            "rss_mb": 150.0 + m,
            "anon_mb": 100.0,
            "file_mb": 50.0 + m,
        }
        for m in range(11)
    ]
    got = soak.rss_figures(samples)
    assert got["anon_slope_mb_per_1000_pipelines"] == pytest.approx(0.0)
    assert got["file_slope_mb_per_1000_pipelines"] == pytest.approx(10.0)
    assert got["slope_mb_per_1000_pipelines"] == pytest.approx(10.0)
    # Samples without the split (older runs) report no split slopes.
    plain = [{k: v for k, v in s.items() if k not in ("anon_mb", "file_mb")} for s in samples]
    assert "anon_slope_mb_per_1000_pipelines" not in soak.rss_figures(plain)
