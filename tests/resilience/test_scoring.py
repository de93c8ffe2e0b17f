"""The weighted route score and its components."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_failover.resilience.config import LatencySLA, ScoringWeights
from agent_failover.resilience.contracts import WindowStats
from agent_failover.resilience.scoring import cost_score, health_score, latency_score, score_route
from tests.resilience.helpers import PROPERTY

SLA = LatencySLA(p95_ms=1000, p99_ms=2000)


def test_components() -> None:
    """Health, latency and cost components follow their documented formulas."""
    assert health_score(WindowStats(error_rate=0.1, semantic_failure_rate=0.05)) == pytest.approx(
        0.85
    )
    assert latency_score(WindowStats(p95_ms=250), SLA) == 0.75
    assert latency_score(WindowStats(p95_ms=5000), SLA) == 0.0
    assert latency_score(WindowStats(), SLA) == 0.5
    assert cost_score(1.0, 1.0, 3.0) == 1.0 and cost_score(3.0, 1.0, 3.0) == 0.0
    assert cost_score(2.0, 2.0, 2.0) == 1.0


@PROPERTY
@given(
    st.floats(0, 1), st.floats(0, 1), st.one_of(st.none(), st.floats(0, 1e5)),
    st.floats(0, 10), st.floats(0, 10), st.floats(0, 10),
)  # fmt: skip
def test_score_is_bounded_and_weighted(err, sem, p95, c, lo, hi) -> None:
    """The total is the weighted sum of components, each in [0, 1]."""
    lo, hi = min(lo, hi, c), max(lo, hi, c)
    w = ScoringWeights()
    s = score_route("r", WindowStats(error_rate=err, semantic_failure_rate=sem, p95_ms=p95),
                    SLA, w, c, lo, hi)  # fmt: skip
    for part in (s.health, s.latency, s.cost, s.total):
        assert 0.0 <= part <= 1.0 + 1e-9
    expected = w.health * s.health + w.latency * s.latency + w.cost * s.cost
    assert s.total == pytest.approx(expected)
