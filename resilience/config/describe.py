"""The summary ``failover config check`` prints for a valid policy (pure, no IO).

:func:`describe_policy` gives one line on the endpoints, roles, breaker seeds and probe
cadence, then one line per endpoint (wire, model, organisation and region, context window,
auth, base URL) and per role (its tiers, cache, budgets, hedging and, when a qualification
lock is attached, which routes it leaves out of the role's plans).
"""

from __future__ import annotations

from agent_failover.resilience.config.gates import route_unqualified
from agent_failover.resilience.config.policy import PolicyConfig
from agent_failover.resilience.config.roles import RolePolicy
from agent_failover.resilience.qualification import threshold


def describe_policy(cfg: PolicyConfig) -> list[str]:
    """A short summary: endpoints, breaker seeds, then one line per role roster."""
    b = cfg.breaker
    lines = [
        f"{len(cfg.endpoints)} endpoints, {len(cfg.roles)} roles; breaker trips at "
        f"{b.error_rate_threshold:.0%} errors over {b.error_window_s:g}s "
        f"(min {b.min_calls} calls), opens {b.open_duration_s:g}s x{b.open_duration_multiplier:g} "
        f"up to {b.max_open_duration_s:g}s; probes every {cfg.probes.interval_s:g}s",
    ]
    for name, ep in cfg.endpoints.items():
        wire = ep.provider.value + (f" on {ep.cloud.value}" if ep.cloud else "")
        auth = f", auth {ep.auth.value}" if ep.auth else ""
        lines.append(
            f"  endpoint {name}: {wire} {ep.model} ({ep.organisation}/{ep.region}, "
            f"window {ep.context_window or 'not configured'}{auth}) at {ep.base()}"
        )
    for name, role in cfg.roles.items():
        r = role.roster
        tiers = " | ".join(f"t{t}: {', '.join(routes)}" for t, routes in r.tiers() if routes)
        cache = "cache" if r.cache.enabled else "no cache"
        hedge = " hedged" if role.hedging.enabled and role.stateless else ""
        lines.append(
            f"  role {name}: {tiers} | {cache} | static; budget {role.total_budget_ms:g} ms, "
            f"ttft {role.ttft_budget_ms:g} ms{hedge}"
        )
        if role.qualification is not None:
            lines.append(f"    {_qualification_line(role)}")
    return lines


def _qualification_line(role: RolePolicy) -> str:
    """Which routes the lock file leaves out of the role's plans, and from which run."""
    q = role.qualification
    assert q is not None
    out = [r for r in role.roster.routes() if route_unqualified(r, role)]
    left = f"never planned: {', '.join(out)}" if out else "every measured route qualifies"
    gates = role.quality_gates
    line = (
        f"qualified {q.qualified_at} on {q.golden_set} ({q.golden_hash}), min_quality "
        f"{threshold(role.min_quality, q):.2f}, {gates.relative_min_score:.0%} of the "
        f"primary: {left}"
    )
    if q.stale:
        then = "treated as unqualified (require_fresh)" if gates.require_fresh else "still applied"
        line += (
            f"\n    STALE: {'; '.join(q.stale)}; {then}: re-run failover qualify --role {role.name}"
        )
    return line
