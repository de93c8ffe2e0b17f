"""Drill files and the per-phase figures, on synthetic samples (no servers, no clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_failover.testing.drill import DrillFile, Sample, load_drill, summarise

SCENARIOS = Path(__file__).resolve().parents[2] / "bench" / "scenarios"
PRIMARY = "anthropic-us-east"


def _drill(**settings: object) -> DrillFile:
    return DrillFile.model_validate(
        {
            "name": "t",
            "drill": {"rate_per_s": 2, "duration_s": 30, **settings},
            "events": [{"from": 10, "to": 20, "endpoint": PRIMARY, "answers": 529}],
        }
    )


def test_every_shipped_scenario_loads_and_fits_its_duration() -> None:
    names = {p.stem for p in SCENARIOS.glob("*.yaml")}
    assert names >= {
        "hard_primary_outage",
        "slow_first_token",
        "primary_flapping",
        "rate_limit_storm",
        "provider_outage",
    }
    for path in SCENARIOS.glob("*.yaml"):
        d = load_drill(path)
        start, end = d.fault_window()
        assert 0 < start < end <= d.drill.duration_s
        assert [p[0] for p in d.phases()] == ["before", "fault", "after"]


def test_a_drill_must_end_and_cover_its_faults(tmp_path: Path) -> None:
    bad = tmp_path / "open.yaml"
    bad.write_text("name: x\nevents: [{from: 1, endpoint: a, answers: 529}]\n")
    with pytest.raises(ValueError, match=r"(?s)open\.yaml.*every event needs 'to'"):
        load_drill(bad)
    with pytest.raises(ValueError, match=r"duration_s \(5.0\) ends before the last fault"):
        _drill(duration_s=5)
    with pytest.raises(ValueError, match="rate_per_s"):
        _drill(rate_per_s=0)


def test_scaling_stretches_faults_and_duration_and_bounds_requests() -> None:
    d = _drill().scaled(0.5)
    assert d.fault_window() == (5.0, 10.0) and d.drill.duration_s == 15.0
    assert d.requests == 30
    assert _drill(max_requests=7).requests == 7
    with pytest.raises(ValueError, match="time scale"):
        _drill().scaled(0)


def _s(i: float, ttfa: float | None, route: str | None, tier: int | None, **kw) -> Sample:
    outcome = kw.pop("outcome", "answered" if ttfa is not None else "failed")
    return Sample(int(i * 10), i, ttfa, outcome, tier, route, **kw)


def test_summary_per_phase_detection_restoration_amplification_and_cost() -> None:
    samples = [
        _s(1, 0.1, PRIMARY, 0, attempts=1, cost_usd=1.0, primary_cost_usd=1.0),
        _s(11, 0.5, "openai-us", 1, attempts=2, cost_usd=0.5, primary_cost_usd=1.0),
        _s(12, 0.3, "openai-us", 1, attempts=1, cost_usd=0.5, primary_cost_usd=1.0),
        _s(13, 0.2, "static", 3, attempts=0, outcome="escalated"),
        _s(14, None, None, None, error="timeout"),
        _s(21, 0.2, "openai-us", 1, attempts=1, cost_usd=0.5, primary_cost_usd=1.0),
        _s(23, 0.4, PRIMARY, 0, attempts=1, cost_usd=1.0, primary_cost_usd=1.0),
    ]
    # upstream: every request attempt plus 3 probes in the fault phase, 1 after the end
    arrivals = [1.0, 11.0, 11.2, 12.0, 12.5, 13.0, 19.0, 21.0, 23.0, 31.0]
    rep = summarise(_drill(), samples, arrivals)
    fault = rep["phases"]["fault"]
    assert fault["requests"] == 4 and fault["failed"] == 1 and fault["escalated"] == 1
    assert fault["success_rate"] == 0.75
    assert fault["tier_share"] == {"1": 1.0}
    assert fault["amplification"] == 1.0  # 3 request calls / 3 answered-or-escalated
    assert fault["amplification_with_probes"] == 2.0  # 6 upstream / 3
    assert fault["probe_calls_per_min"] == 18.0  # 3 probes in 10 s
    assert fault["cost_vs_all_primary"] == 0.5
    after = rep["phases"]["after"]
    assert after["amplification_with_probes"] == 1.5  # the late arrival belongs to it
    assert rep["detection_s"] == pytest.approx(1.5)  # fault at 10, standby answer at 11.5
    assert rep["restoration_s"] == pytest.approx(3.4)  # recovery at 20, primary at 23.4
    assert rep["overall"]["requests"] == 7


def test_without_background_calls_every_upstream_call_is_a_requests() -> None:
    samples = [_s(11, 2.0, PRIMARY, 0, attempts=0, cost_usd=1, primary_cost_usd=1)]
    rep = summarise(_drill(), samples, [11.0, 11.5, 12.5], background_calls=False)
    fault = rep["phases"]["fault"]
    assert fault["amplification"] == 3.0 and fault["probe_calls_per_min"] == 0.0
    assert rep["detection_s"] is None and rep["restoration_s"] is None
