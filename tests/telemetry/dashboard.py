"""Reading the committed Grafana dashboard and a Prometheus scrape, for the tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy/grafana/dashboards/failover.json"
_SERIES = re.compile(r"\b((?:failover|gen_ai|temporal)_[A-Za-z0-9_]+)\b")


def dashboard_series(path: Path = DASHBOARD) -> set[str]:
    """Every series name the dashboard's queries read."""
    board = json.loads(path.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    return {m for e in exprs for m in _SERIES.findall(e) if not m.startswith("gen_ai_token_type")}


def served_series(text: str) -> set[str]:
    """Every sample name in a Prometheus text exposition."""
    return {
        line.split("{")[0].split(" ")[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


RULES = ROOT / "deploy/prometheus/alerts.yml"
#: Labels Prometheus itself adds to every scraped series (target labels) or to buckets.
TARGET_LABELS = {"job", "instance"}
_SELECTOR = re.compile(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*\"([^\"]*)\"")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def rule_expressions(path: Path = RULES) -> dict[str, str]:
    """Every alerting (or recording) rule's expression, keyed by its name."""
    import yaml

    doc = yaml.safe_load(path.read_text())
    return {r.get("alert") or r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def served_labels(text: str) -> dict[str, dict[str, set[str]]]:
    """Per sample name of a Prometheus text exposition: each label and the values seen."""
    out: dict[str, dict[str, set[str]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition("{")
        name = name.split(" ")[0]
        labels = out.setdefault(name, {})
        if rest:
            for key, _, value in _MATCHER.findall(rest.rpartition("}")[0]):
                labels.setdefault(key, set()).add(value)
    return out


def expression_problems(name: str, expr: str, served: dict[str, dict[str, set[str]]]) -> list[str]:
    """What ``expr`` reads that the scrape does not serve: a series, a label of the series
    it selects, a value an equality matcher wants, a label it groups or matches on."""
    problems = []
    metrics = set(_SERIES.findall(expr))
    for metric, body in _SELECTOR.findall(expr):
        metrics.add(metric)
        for label, op, value in _MATCHER.findall(body):
            if label in TARGET_LABELS:
                continue
            seen = served.get(metric, {})
            if label not in seen:
                problems.append(f"{name}: {metric} has no label {label!r}")
            elif op == "=" and value not in seen[label]:
                problems.append(f"{name}: {metric}{{{label}={value!r}}} is never served")
    missing = sorted(m for m in metrics if m not in served)
    problems += [f"{name}: series {m} is not served" for m in missing]
    known = TARGET_LABELS | {k for m in metrics for k in served.get(m, {})}
    for group in _GROUPING.findall(expr):
        for label in filter(None, (x.strip() for x in group.split(","))):
            if label not in known:
                problems.append(f"{name}: groups by {label!r}, a label none of its series has")
    return problems
