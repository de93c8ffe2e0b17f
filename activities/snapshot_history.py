"""How a role context's health snapshot is written to history, and read back.

A snapshot enters history on every call (it is a local activity's result), so it is
written as planning reads it: without defaults, without the fields planning never reads
(:data:`UNPLANNED_FIELDS`), without the routes' repeated names and shared window, and with
floats cut to :data:`SNAPSHOT_DECIMALS`. :func:`expand_snapshot` restores the values
planning reads. Pure functions over plain dicts: no IO.
"""

from __future__ import annotations

from typing import Any

from agent_failover.resilience.contracts import HealthSnapshot

#: ``taken_at`` of a snapshot whose history left it out (the workflow sets its own ``now``).
UNSTATED_TIME = 0.0
#: Decimals kept of the snapshot's floats in history (timestamps in s, latencies in ms).
SNAPSHOT_DECIMALS = 3


def rounded(value: Any) -> Any:
    """``value`` with every float in it cut to :data:`SNAPSHOT_DECIMALS`."""
    if isinstance(value, float):
        return round(value, SNAPSHOT_DECIMALS)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


#: What planning in the workflow never reads of a route's health (the activity reads them
#: from the store; ``status`` and ``health`` show them): left out of history. Planning
#: reads the breaker, cool-down, budgets, learned context window, SLA and quality verdicts,
#: the recent streak, the window's error/semantic rates, p95/p99, TTFT p95 and sample
#: counts, and the role's own p95/p99 and sample count (``resilience.planner``, ``.sla``,
#: ``.scoring``, ``.shadow``, ``.summarize``).
UNPLANNED_FIELDS = frozenset({"last_probe_at", "last_probe_ok", "last_call_at"})
UNPLANNED_STATS = frozenset(
    {
        "errors",
        "semantic_failures",
        "slow_calls",
        "slow_call_rate",
        "p50_ms",
        "ttft_p50_ms",
        "ttft_p99_ms",
        "enough_samples",
        "probes",
    }
)

#: What the SLA reads of a route's ``role_stats`` (the role's own calls plus probes).
ROLE_SLA_STATS = frozenset({"p95_ms", "p99_ms", "latency_samples"})

_UNPLANNED: dict[str, Any] = {
    "route": True,
    **dict.fromkeys(UNPLANNED_FIELDS, True),
    "stats": dict.fromkeys(UNPLANNED_STATS, True),
}
_UNPLANNED_AND_RECENT: dict[str, Any] = {**_UNPLANNED, "recent": True}


def _planned_route(rh: Any, newest_observation: bool) -> dict[str, Any]:
    """One route's health as planning reads it (see :data:`UNPLANNED_FIELDS`)."""
    streak_unread = not rh.sla_demoted and rh.sla_since is None and rh.recent
    d = rh.model_dump(
        mode="json",
        exclude_defaults=True,
        # Observations no streak reads are not dumped at all (most calls: a healthy route).
        exclude=_UNPLANNED_AND_RECENT if streak_unread else _UNPLANNED,
    )
    stats = d.get("stats", {})
    if stats.get("latency_samples"):
        stats.pop("calls", None)  # sla reads ``latency_samples or calls``
    if "role_stats" in d:
        # The role's own latency: the SLA reads its percentiles and sample count only.
        d["role_stats"] = {k: v for k, v in d["role_stats"].items() if k in ROLE_SLA_STATS}
    if streak_unread and newest_observation:
        # The streaks only count while demoted or after a change; a restored primary
        # (resilience.shadow.primary_restored, re-runs only) reads the newest observation.
        d["recent"] = [rh.recent[-1].model_dump(mode="json", exclude_defaults=True)]
    return d


#: Marks a snapshot read for a role (every route has ``role_stats``): a route's
#: ``role_stats`` left out are the SLA's view of its ``stats`` (see :func:`compact_snapshot`).
ROLE_READ = "role_read"


def _role_stats_implied(d: dict[str, Any]) -> dict[str, Any]:
    """The ``role_stats`` a role-read route leaves out: its stats' SLA view (the same
    numbers when the role is the route's only caller; both empty when it is idle)."""
    return {k: v for k, v in d.get("stats", {}).items() if k in ROLE_SLA_STATS}


def compact_snapshot(snap: HealthSnapshot, newest_observation: bool = True) -> dict[str, Any]:
    """The snapshot as planning reads it, without defaults, route names, one window
    repeated per route, or the routes with nothing to say (restored from the policy).

    A snapshot read for a role (every route has ``role_stats``) is marked
    :data:`ROLE_READ` and writes a route's ``role_stats`` only where they differ from its
    stats' SLA view: an idle route (both empty) then has nothing to say at all.
    """
    windows = [rh.stats.window_s for rh in snap.routes.values()]
    window = max(set(windows), key=windows.count) if windows else 0.0
    role_read = bool(snap.routes) and all(rh.role_stats is not None for rh in snap.routes.values())
    routes: dict[str, Any] = {}
    for name, rh in snap.routes.items():
        d = _planned_route(rh, newest_observation)
        if role_read and d.get("role_stats") == _role_stats_implied(d):
            del d["role_stats"]
        stats = d.get("stats", {})
        if stats.get("window_s") == window:
            stats.pop("window_s")
        if not stats:
            d.pop("stats", None)
        if d:
            routes[name] = rounded(d)
    # ``taken_at`` is the role context's ``now``, the workflow's own clock: it restores it.
    out = snap.model_dump(mode="json", exclude_defaults=True, exclude={"routes", "taken_at"})
    if role_read:
        out[ROLE_READ] = True
    return {**rounded(out), "window_s": window, "routes": routes}


def expand_snapshot(data: dict[str, Any], endpoints: list[str]) -> dict[str, Any]:
    """A snapshot written by :func:`compact_snapshot` with what it left out put back
    (every endpoint of the policy, the shared window, ``taken_at`` as unstated)."""
    window = data["window_s"]
    role_read = bool(data.get(ROLE_READ))
    routes = {}
    given = data.get("routes") or {}
    # A route left out had nothing but defaults (and the shared window) to say.
    for name, d in {**given, **{n: {} for n in endpoints if n not in given}}.items():
        if role_read and "role_stats" not in d:
            d = {**d, "role_stats": _role_stats_implied(d)}
        stats = {"window_s": window, **d.get("stats", {})}
        routes[name] = {**d, "route": name, "stats": stats}
    out = {k: v for k, v in data.items() if k not in ("window_s", ROLE_READ)} | {"routes": routes}
    return {"taken_at": UNSTATED_TIME, **out}
