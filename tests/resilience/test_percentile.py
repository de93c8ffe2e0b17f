"""The exact nearest-rank percentile shared by the windows, the SLA and qualification."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.percentile import percentile
from tests.resilience.helpers import PROPERTY, latencies, reference_percentile


@PROPERTY
@given(latencies, st.floats(min_value=0.0, max_value=100.0))
def test_percentile_matches_reference(values: list[float], q: float) -> None:
    """percentile() equals the smallest value whose rank covers q% of the samples."""
    assert percentile(values, q) == reference_percentile(values, q)


@PROPERTY
@given(latencies)
def test_percentile_is_an_observed_value_and_monotone(values: list[float]) -> None:
    """Percentiles are observed samples and never decrease as q grows."""
    p50, p95, p99 = (percentile(values, q) for q in (50, 95, 99))
    assert {p50, p95, p99} <= set(values)
    assert p50 <= p95 <= p99 <= max(values)


def test_percentile_edges() -> None:
    """Empty input gives None; q outside [0, 100] is rejected; q=0 is the minimum."""
    assert percentile([], 95) is None
    assert percentile([3.0, 1.0, 2.0], 0) == 1.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    with pytest.raises(ValueError):
        percentile([1.0], 101)
    with pytest.raises(ValueError):
        percentile([1.0], math.nan)
