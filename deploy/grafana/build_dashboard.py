"""Writes deploy/grafana/dashboards/failover.json, the degradation dashboard.

Run ``python deploy/grafana/build_dashboard.py`` after changing a panel; a test checks the
committed JSON is this script's output and that every series it queries is one the
worker's scrape endpoint serves (Prometheus names of ``agent_failover.telemetry.names``).
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).parent / "dashboards" / "failover.json"
DS = {"type": "prometheus", "uid": "prometheus"}
#: Only the workers' own endpoints: the collector re-exposes nothing of ours (metrics are
#: not pushed over OTLP in docker-compose), so no series is counted twice.
SEL = 'job="failover-workers"'
W = "$__rate_interval"


def q(expr: str, legend: str, ref: str = "A") -> dict:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}


def panel(title: str, targets: list[dict], *, unit: str = "short", kind: str = "timeseries",
          desc: str = "", **extra: object) -> dict:  # fmt: skip
    return {
        "type": kind,
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "right"}},
        **extra,
    }


def quantiles(metric: str, by: str, where: str = "") -> list[dict]:
    sel = f"{SEL}{', ' + where if where else ''}"
    return [
        q(
            f"histogram_quantile({p}, sum by (le, {by}) (rate({metric}_bucket{{{sel}}}[{W}])))",
            f"p{int(p * 100)} " + " ".join(f"{{{{{b.strip()}}}}}" for b in by.split(",")),
            ref,
        )
        for p, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))
    ]


def panels() -> list[dict]:
    ok = 'error_type=""'
    return [
        panel(
            "Substitution rate by role",
            [q(f"sum by (role) (rate(failover_substitutions_total{{{SEL}}}[{W}]))", "{{role}}")],
            unit="ops",
            desc="Failovers per second: an attempt failed or was skipped and "
            "another route, the cache or the static fallback answered.",
        ),
        panel(
            "Degraded-mode rate",
            [
                q(
                    f'sum(rate(failover_answers_total{{{SEL}, capability!="full"}}[{W}])) / '
                    f"sum(rate(failover_answers_total{{{SEL}}}[{W}]))",
                    "degraded share",
                )
            ],
            unit="percentunit",
            desc="Share of answers below full capability.",
        ),
        panel(
            "Answers by served tier",
            [q(f"sum by (tier) (rate(failover_answers_total{{{SEL}}}[{W}]))", "tier {{tier}}")],
            unit="ops",
        ),
        panel(
            "Time to restoration",
            quantiles("failover_restoration_duration_seconds", "route"),
            unit="s",
            desc="From a breaker opening to its closing again.",
        ),
        panel(
            "Cascade depth",
            [
                q(
                    f"sum by (role) (rate(failover_cascade_depth_sum{{{SEL}}}[{W}])) / "
                    f"sum by (role) (rate(failover_cascade_depth_count{{{SEL}}}[{W}]))",
                    "mean {{role}}",
                ),
                q(
                    f"histogram_quantile(0.95, sum by (le, role) "
                    f"(rate(failover_cascade_depth_bucket{{{SEL}}}[{W}])))",
                    "p95 {{role}}",
                    "B",
                ),
            ],
            desc="Attempts one call took (1: the first route answered).",
        ),
        panel(
            "Semantic validation pass rate",
            [
                q(
                    "sum by (route) (rate(failover_validations_total"
                    f'{{{SEL}, result="pass"}}[{W}])) / '
                    f"sum by (route) (rate(failover_validations_total{{{SEL}}}[{W}]))",
                    "{{route}}",
                )
            ],
            unit="percentunit",
        ),
        panel(
            "Compensations",
            [
                q(
                    f"sum by (outcome) (rate(failover_compensations_total{{{SEL}}}[{W}]))",
                    "{{outcome}}",
                )
            ],
            unit="ops",
        ),
        panel(
            "Escalations",
            [q(f"sum by (event) (increase(failover_escalations_total{{{SEL}}}[1h]))", "{{event}}")],
            desc="Opened and resolved in the last hour.",
        ),
        panel(
            "Per-route latency p50/p95/p99",
            quantiles("gen_ai_client_operation_duration_seconds", "route", ok),
            unit="s",
            desc="gen_ai.client.operation.duration of answered attempts.",
        ),
        panel(
            "Per-role, per-route latency p50/p95/p99",
            quantiles("gen_ai_client_operation_duration_seconds", "role, route", ok),
            unit="s",
            desc="The same duration by the role that made the call: each role's SLA is "
            "judged on its own calls on a route (plus probes), not on every role's.",
        ),
        panel(
            "Per-route time to first chunk",
            quantiles("gen_ai_client_operation_time_to_first_chunk_seconds", "route"),
            unit="s",
        ),
        panel(
            "Breaker states over time",
            [q(f"max by (route) (failover_breaker_state{{{SEL}}})", "{{route}}")],
            kind="state-timeline",
            desc="0 closed, 1 half-open, 2 open.",
            fieldConfig={
                "defaults": {
                    "mappings": [
                        {
                            "type": "value",
                            "options": {
                                "0": {"text": "closed", "color": "green"},
                                "1": {"text": "half-open", "color": "yellow"},
                                "2": {"text": "open", "color": "red"},
                            },
                        }
                    ]
                },
                "overrides": [],
            },
        ),
        panel(
            "Attempts by outcome",
            [q(f"sum by (outcome) (rate(failover_attempts_total{{{SEL}}}[{W}]))", "{{outcome}}")],
            unit="ops",
        ),
        panel(
            "Hedges",
            [q(f"sum by (event) (rate(failover_hedges_total{{{SEL}}}[{W}]))", "{{event}}")],
            unit="ops",
        ),
        panel(
            "Cache hits and age of served answers",
            [
                q(
                    f"sum by (hit) (rate(failover_cache_lookups_total{{{SEL}}}[{W}]))",
                    "hit={{hit}}",
                ),
                q(
                    f"histogram_quantile(0.95, sum by (le) "
                    f"(rate(failover_cache_age_seconds_bucket{{{SEL}}}[{W}])))",
                    "age p95 (s)",
                    "B",
                ),
            ],
        ),
        panel(
            "Shared store outages",
            [
                q(
                    f"sum by (store) (increase(failover_store_degraded_total{{{SEL}}}[1h]))",
                    "{{store}}",
                )
            ],
        ),
        panel(
            "Shadow samples and agreement",
            [
                q(
                    f"sum by (route, agreed) (rate(failover_shadow_samples_total{{{SEL}}}[{W}]))",
                    "{{route}} agreed={{agreed}}",
                ),
                q(
                    f"sum by (route) (rate(failover_shadow_agreement_sum{{{SEL}}}[{W}])) / "
                    f"sum by (route) (rate(failover_shadow_agreement_count{{{SEL}}}[{W}]))",
                    "mean agreement {{route}}",
                    "B",
                ),
            ],
            desc="Shadow-evaluation samples per second (agreed: score at or above the "
            "scorer's pass threshold) and the mean agreement with the reference route (0..1).",
        ),
        panel(
            "Quality regressions",
            [
                q(
                    "sum by (role, route, event) "
                    f"(increase(failover_quality_regressions_total{{{SEL}}}[1h]))",
                    "{{role}} {{route}} {{event}}",
                )
            ],
            desc="QUALITY_REGRESSION verdicts found (regressed) and lifted (restored) "
            "in the last hour, per role and route.",
        ),
        panel(
            "Rate-budget refusals",
            [
                q(
                    "sum by (scope, route, bulkhead) "
                    f"(rate(failover_rate_budget_refusals_total{{{SEL}}}[{W}]))",
                    "{{scope}} ({{route}}, {{bulkhead}})",
                )
            ],
            unit="ops",
            desc="Calls refused by a shared rate budget before reaching the provider, by "
            "the refusing bucket (endpoint:<route> or bulkhead:<name>), route and bulkhead.",
        ),
        panel(
            "Local saturation",
            [
                q(
                    "sum by (route, bulkhead) "
                    f"(rate(failover_local_saturations_total{{{SEL}}}[{W}]))",
                    "{{route}} ({{bulkhead}})",
                )
            ],
            unit="ops",
            desc="Calls that found every one of a worker's own connection slots to the route "
            "busy (local_saturation): our saturation, never counted against the route.",
        ),
        panel(
            "Tokens and cost",
            [
                q(
                    "sum by (gen_ai_token_type) "
                    f"(rate(gen_ai_client_token_usage_sum{{{SEL}}}[{W}]))",
                    "{{gen_ai_token_type}} tokens/s",
                ),
                q(
                    f"sum by (route) (rate(failover_cost_USD_total{{{SEL}}}[{W}]))",
                    "USD/s {{route}}",
                    "B",
                ),
            ],
        ),
        panel(
            "Cost efficiency: tokens per dollar by route",
            [
                q(
                    f"sum by (route) (rate(gen_ai_client_token_usage_sum{{{SEL}}}[{W}])) / "
                    f"sum by (route) (rate(failover_cost_USD_total{{{SEL}}}[{W}]))",
                    "{{route}} now",
                ),
                q(
                    f"sum by (route) (rate(gen_ai_client_token_usage_sum{{{SEL}}}[7d])) / "
                    f"sum by (route) (rate(failover_cost_USD_total{{{SEL}}}[7d]))",
                    "{{route}} 7-day baseline",
                    "B",
                ),
            ],
            desc="Tokens per dollar of each route against its 7-day baseline; the alert "
            "FailoverCostEfficiencyLow fires below 50 % of the baseline for 30 minutes.",
        ),
        panel(
            "Temporal: task latencies and completions",
            [
                q(
                    f"histogram_quantile(0.95, sum by (le) (rate("
                    f"temporal_workflow_task_schedule_to_start_latency_seconds_bucket{{{SEL}}}[{W}])))",
                    "workflow task schedule-to-start p95",
                ),
                q(
                    f"histogram_quantile(0.95, sum by (le) (rate("
                    f"temporal_activity_schedule_to_start_latency_seconds_bucket{{{SEL}}}[{W}])))",
                    "activity schedule-to-start p95",
                    "B",
                ),
                q(
                    f"sum(rate(temporal_workflow_completed_total{{{SEL}}}[{W}]))",
                    "workflows completed/s",
                    "C",
                ),
            ],
            desc="The Temporal SDK's own metrics, served by the same endpoint.",
        ),
    ]


def dashboard() -> dict:
    items = panels()
    for i, p in enumerate(items):
        p["id"] = i + 1
        p["gridPos"] = {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i // 2) * 8}
    return {
        "uid": "agent-failover",
        "title": "agent-failover: degradation",
        "tags": ["agent-failover"],
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "panels": items,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
