"""Running aggregates: bucket increments, window seconds, histogram percentiles and slow counts."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.aggregates import (
    bin_upper,
    bucket_fields,
    decode_recent,
    encode_recent,
    hist_percentile,
    merge_fields,
    slow_count,
    stats_from_fields,
    window_bin,
    window_seconds,
)
from agent_failover.resilience.contracts import CallOutcome
from agent_failover.resilience.errors import ErrorClass


def test_bucket_fields_of_each_kind() -> None:
    """Errors, semantic failures, probes and TTFT each add their counter; 429s add none."""
    ok = CallOutcome(route="r", at=1.5, ok=True, latency_ms=100.0, ttft_ms=20.0, probe=True)
    assert bucket_fields(ok) == {
        "c": 1, f"l{window_bin(100)}": 1, f"l{window_bin(100)}@": 1, "p": 1,
        f"t{window_bin(20)}": 1,
    }  # fmt: skip
    mine = CallOutcome(route="r", at=1.5, ok=True, latency_ms=100.0, role="planner")
    assert bucket_fields(mine)[f"l{window_bin(100)}@planner"] == 1
    sem = CallOutcome(route="r", at=1.0, ok=False, semantic_failure=True, latency_ms=5.0)
    assert bucket_fields(sem)["s"] == 1 and "e" not in bucket_fields(sem)
    err = CallOutcome(route="r", at=1.0, ok=False, error_class=ErrorClass.SERVER_ERROR)
    assert bucket_fields(err)["e"] == 1
    limited = CallOutcome(route="r", at=1.0, ok=False, counts_against_route=False)
    assert bucket_fields(limited) == {} and encode_recent(limited) == ""


def test_window_seconds_are_capped_by_horizon() -> None:
    """A window covers floor(now - w) .. floor(now), newest first, never past the horizon."""
    assert list(window_seconds(100.5, 3.0, 600.0)) == [100, 99, 98, 97]
    assert len(window_seconds(10_000.0, 3600.0, 60.0)) == 61


@given(st.lists(st.floats(min_value=0.5, max_value=1e6), min_size=1, max_size=200))
def test_histogram_percentile_bounds(latencies: list[float]) -> None:
    """The histogram p95 is never below the exact nearest-rank p95 nor 2 % above it."""
    fields = merge_fields({f"l{window_bin(x)}": 1} for x in latencies)
    hist = {int(k[1:]): n for k, n in fields.items()}
    exact = sorted(latencies)[max(1, math.ceil(0.95 * len(latencies))) - 1]
    got = hist_percentile(hist, 95)
    assert got is not None and max(exact, 1.0) <= got * (1 + 1e-9)
    assert got <= max(exact, 1.0) * 1.02 + 1e-9


def test_slow_count_only_whole_bins_above_threshold() -> None:
    """A bin straddling the threshold is not slow; bins wholly above it are."""
    b = window_bin(1000.0)
    assert slow_count({b: 5}, 1000.0) == 0
    assert slow_count({b + 1: 3, b + 5: 2}, bin_upper(b)) == 5
    assert slow_count({b + 5: 2}, None) == 0


def test_stats_from_fields_rates() -> None:
    """Rates divide by counted calls; the semantic rate uses its own window when given."""
    fields = {"c": 10, "e": 2, "p": 1, "l100": 10}
    stats = stats_from_fields(fields, window_s=30, min_calls=5, semantic={"c": 20, "s": 5})
    assert (stats.error_rate, stats.semantic_failure_rate, stats.probes) == (0.2, 0.25, 1)
    assert stats.enough_samples and stats.p50_ms == bin_upper(100)


def test_recent_round_trip_filters_future_and_keeps_newest() -> None:
    """Entries after ``now`` are dropped; the newest ``keep`` are returned oldest first."""
    entries = [
        encode_recent(CallOutcome(route="r", at=float(t), ok=t % 2 == 0, latency_ms=t))
        for t in (5, 1, 3, 9)
    ]
    got = decode_recent(entries, now=6.0, keep=2)
    assert [(s.at, s.ok) for s in got] == [(3.0, False), (5.0, False)]


def _decode_recent_reference(
    entries: list[str], *, now: float, keep: int, role: str | None = None
) -> list[tuple[float, float, bool]]:
    """The plain definition: every entry a sample, sorted by time (stably), the newest kept."""
    samples = []
    for e in entries:
        at, lat, ok, *tag = e.split("|")
        if role is not None and tag and tag[0] != role:
            continue
        if float(at) <= now:
            samples.append((float(at), float(lat), ok == "1"))
    samples.sort(key=lambda s: s[0])
    return samples[-keep:] if keep else []


def test_decode_recent_matches_its_definition_on_random_rings() -> None:
    """Only the kept entries become samples: the same samples, in the same order (ties in
    time keep the ring's order), role filter and ``now`` applied, as the definition."""
    import random

    rng = random.Random(7)
    for _ in range(300):
        entries = []
        for _ in range(rng.randint(0, 40)):
            outcome = CallOutcome(
                route="r",
                at=float(rng.randint(0, 30)),  # coarse times: many ties
                ok=rng.random() < 0.7,
                latency_ms=float(rng.randint(1, 5000)),
                role=rng.choice([None, "planner", "critic"]),
                probe=rng.random() < 0.2,
            )
            if entry := encode_recent(outcome):
                entries.append(entry)
        now, keep = float(rng.randint(0, 35)), rng.choice([0, 1, 5, 16, 64])
        role = rng.choice([None, "planner", "critic"])
        got = decode_recent(entries, now=now, keep=keep, role=role)
        want = _decode_recent_reference(entries, now=now, keep=keep, role=role)
        assert [(s.at, s.latency_ms, s.ok) for s in got] == want
