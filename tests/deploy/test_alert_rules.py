"""The Prometheus alerting rules: loaded by compose's Prometheus, unit-tested beside them,
and checked against what a scrape really serves (the check itself is tested here; the
real scrape is in tests/telemetry/test_prometheus_pipeline_devserver.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.telemetry.dashboard import RULES, expression_problems, rule_expressions

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy/prometheus/prometheus.yml"
RULE_TESTS = ROOT / "deploy/prometheus/alerts_test.yml"
#: What each rule the seeds ask for must be called (the docs name them too).
SEEDED = {
    "FailoverSubstitutionShareHigh": "> 0.05",
    "FailoverDegradedShareHigh": "> 0.05",
    "FailoverCascadeDepth": 'le="1"',
    "FailoverEscalationPending": 'event="opened"',
    "FailoverBreakerOpen": "== 2",
    "FailoverShadowQualityRegression": 'event="regressed"',
    "FailoverCostEfficiencyLow": "< 0.5 *",
}

SCRAPE = """\
# HELP failover_answers_total Answers by served tier and capability
failover_answers_total{capability="full",role="analyst",tier="0"} 3.0
failover_cascade_depth_bucket{le="1",role="analyst"} 3.0
failover_breaker_state{route="openai-us"} 0.0
"""


def _doc(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def test_the_check_catches_series_labels_values_and_groupings_not_served() -> None:
    """A rule reading an unknown series, a label its series lack, a label value never
    served or grouping by a label no series has is reported; a good rule is not."""
    from tests.telemetry.dashboard import served_labels

    served = served_labels(SCRAPE)
    good = 'sum by (role) (rate(failover_answers_total{job="w", tier!="0"}[5m])) > 0'
    assert expression_problems("ok", good, served) == []
    bad = {
        "series": "rate(failover_answer_total[5m]) > 0",
        "label": 'failover_answers_total{agent="analyst"} > 0',
        "value": 'failover_cascade_depth_bucket{le="1.0"} > 0',
        "grouping": "max by (endpoint) (failover_breaker_state) == 2",
    }
    for kind, expr in bad.items():
        assert len(expression_problems(kind, expr, served)) == 1, kind


def test_every_seeded_rule_ships_with_its_threshold() -> None:
    """The six rules the seeds ask for, plus cost efficiency, with the seeds' numbers."""
    rules = rule_expressions()
    for name, fragment in SEEDED.items():
        assert fragment in rules[name], name


def test_compose_prometheus_loads_the_rules() -> None:
    """prometheus.yml lists the rules file where compose mounts it, the rules read the
    workers' job, and no target label shadows a label the rules read from our series."""
    cfg = _doc(PROMETHEUS)
    compose = _doc(ROOT / "docker-compose.yml")
    mounts = dict(v.split(":")[:2] for v in compose["services"]["prometheus"]["volumes"])
    assert mounts["./deploy/prometheus/alerts.yml"] in cfg["rule_files"]
    jobs = {j["job_name"] for j in cfg["scrape_configs"]}
    text = RULES.read_text()
    assert 'job="failover-workers"' in text and "failover-workers" in jobs
    target_labels = {k for j in cfg["scrape_configs"] for sc in j["static_configs"]
                     for k in sc.get("labels", {})}  # fmt: skip
    for label in target_labels:
        assert f"({label})" not in text and f"{label}=" not in text, label


def test_every_alert_has_a_promtool_unit_test_beside_it() -> None:
    """alerts_test.yml loads alerts.yml and tests every alert, each at least once firing."""
    tests = _doc(RULE_TESTS)
    assert tests["rule_files"] == ["alerts.yml"]
    firing = {
        t["alertname"]
        for case in tests["tests"]
        for t in case.get("alert_rule_test", [])
        if t["exp_alerts"]
    }
    assert firing == set(rule_expressions())
