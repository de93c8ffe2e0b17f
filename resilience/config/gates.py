"""A role's quality gates applied to its qualification lock entry (pure, no IO).

:func:`route_unqualified` is the one verdict the planner, ``config check``, ``status`` and
``failover qualify`` share: a route the lock measured may be planned only when its golden
score reaches the absolute floor (the role's and the lock's ``min_quality``) and
``relative_min_score`` of the primary's score on the same set, its schema compliance
reaches ``min_schema_compliance`` (roles with an output schema) and its median latency is
within the role's SLA; with ``require_fresh``, a stale entry qualifies nothing.
:func:`role_fingerprint` hashes what a role is qualified with, so the loader can tell a
stale entry (:func:`~resilience.qualification.stale_reasons`). :func:`gate_failures` is
the CI gate: a role left without a qualified fallback.
"""

from __future__ import annotations

from agent_failover.resilience.config.roles import RolePolicy
from agent_failover.resilience.qualification import (
    RoleQualification,
    content_hash,
    unqualified_reason,
)

#: Slack when comparing a score with a share of another (0.85 x 1.0 must pass 0.85).
_EPS = 1e-9


def role_fingerprint(role: RolePolicy) -> dict[str, str]:
    """Hashes of the role's system prompt (with its variants), output schema and tools."""
    return {
        "system_prompt": content_hash(
            {"system_prompt": role.system_prompt, "prompts": role.prompts.model_dump(mode="json")}
        ),
        "output_schema": content_hash(role.output_schema),
        "tools": content_hash([t.model_dump(mode="json") for t in role.tools]),
    }


def primary_quality(role: RolePolicy, q: RoleQualification) -> float | None:
    """The best golden score among the role's tier-0 routes the lock measured."""
    scores = [q.routes[r].quality for r in role.roster.tier0 if r in q.routes]
    return max(scores) if scores else None


def route_unqualified(route: str, role: RolePolicy) -> str | None:
    """Why ``route`` may not be planned for ``role`` by its lock entry, or None."""
    q = role.qualification
    if q is None or route not in q.routes:
        return None
    gates = role.quality_gates
    where = f"on golden set {q.golden_set} ({q.golden_hash}, {q.qualified_at})"
    if q.stale and gates.require_fresh:
        return f"unqualified: stale qualification ({'; '.join(q.stale)}), require_fresh is set"
    absolute = unqualified_reason(route, role.min_quality, q)
    if absolute is not None:
        return absolute
    v = q.routes[route]
    primary = primary_quality(role, q)
    need = gates.relative_min_score * (primary or 0.0)
    if primary is not None and v.quality + _EPS < need:
        return (
            f"unqualified: quality {v.quality:.2f} < {gates.relative_min_score:.0%} of the "
            f"primary's {primary:.2f} {where}"
        )
    schema = v.schema_compliance
    if schema is not None and schema + _EPS < gates.min_schema_compliance:
        return (
            f"unqualified: schema compliance {schema:.0%} < "
            f"{gates.min_schema_compliance:.0%} {where}"
        )
    limit = gates.max_p50_ms or role.sla.p95_ms
    if gates.latency_gate and v.latency_p50_ms is not None and v.latency_p50_ms > limit:
        return f"unqualified: p50 latency {v.latency_p50_ms:.0f} ms > SLA {limit:.0f} ms {where}"
    return None


def gate_failures(role: RolePolicy) -> list[str]:
    """CI gate: problems that leave ``role`` without a qualified fallback (empty = pass).

    A fallback is a tier-1 or tier-2 route; the role fails when none of them qualifies
    (or it has none), and also when no route at all does. Routes the lock does not
    mention do not count as qualified here.
    """
    q = role.qualification
    name = role.name
    if q is None:
        return [f"role {name!r}: not qualified (no lock entry)"]
    tiers = role.roster.tiers()
    ok = {
        r
        for _, routes in tiers
        for r in routes
        if r in q.routes and route_unqualified(r, role) is None
    }
    fallbacks = [r for tier, routes in tiers if tier >= 1 for r in routes]
    problems = []
    if not ok:
        problems.append(f"role {name!r}: no route qualifies")
    if not fallbacks:
        problems.append(f"role {name!r}: has no fallback route (tier1/tier2 are empty)")
    elif not ok.intersection(fallbacks):
        why = "; ".join(f"{r}: {_gate(route_unqualified(r, role))}" for r in fallbacks)
        problems.append(f"role {name!r}: no qualified fallback on {q.golden_set} ({why})")
    return problems


def _gate(reason: str | None) -> str:
    """The failed gate alone (the golden set is named once per role, not per route)."""
    if reason is None:
        return "not measured"
    return reason.removeprefix("unqualified: ").split(" on golden set ")[0]


def with_verdicts(role: RolePolicy, entry: RoleQualification) -> RoleQualification:
    """``entry`` with each route's ``qualified`` flag set by every gate of ``role``."""
    attached = role.model_copy(update={"qualification": entry})
    routes = {
        r: v.model_copy(update={"qualified": route_unqualified(r, attached) is None})
        for r, v in entry.routes.items()
    }
    return entry.model_copy(update={"routes": routes})
