"""Waiting out a short Retry-After another request met, instead of failing over.

A 429 cools its route down for every worker (``cooldown_until`` in the health store), and
the planner skips a cooling route. When that 429 was a health probe's (or another call's)
and its Retry-After is short, skipping is the wrong trade: the standby may be slower,
dearer or a smaller model, and the primary answers in a second or two. :func:`plan_waiting_out`
applies the rule of the call's own 429 (:func:`resilience.ratelimit.shared_cooldown_wait_ms`:
at most ``rate_limit.max_wait_ms``, leaving the attempt its TTFT budget before the call's
end) to what is left of the shared cool-down: when the route it would lift is the one the
plan would start with, the plan is made as of the end of the wait (budget spent by it,
clock moved on) and its first attempt carries ``wait_ms``, which the workflow waits out
with a durable timer before the attempt. A call's own cool-downs (``facts.cooldowns``)
are never waited here: its own 429 already chose.
"""

from __future__ import annotations

from agent_failover.resilience.config import PolicyConfig, RolePolicy
from agent_failover.resilience.contracts import HealthSnapshot
from agent_failover.resilience.plan import FailoverPlan, RequestFacts
from agent_failover.resilience.planner import plan
from agent_failover.resilience.ratelimit import shared_cooldown_wait_ms


def short_waits(
    role: RolePolicy,
    policy: PolicyConfig,
    snapshot: HealthSnapshot,
    facts: RequestFacts,
    now: float,
) -> dict[str, float]:
    """Route -> milliseconds left of a shared cool-down this call may wait out."""
    remaining_ms = max(role.total_budget_ms - facts.elapsed_ms, 0.0)
    waits = {}
    for route in role.roster.routes():
        wait = shared_cooldown_wait_ms(
            snapshot.get(route).cooldown_until,
            facts.cooldowns.get(route),
            policy.rate_limit,
            now=now,
            remaining_ms=remaining_ms,
            ttft_budget_ms=role.ttft_budget_ms,
        )
        if wait:
            waits[route] = wait
    return waits


def plan_waiting_out(
    role: RolePolicy,
    policy: PolicyConfig,
    snapshot: HealthSnapshot,
    facts: RequestFacts,
    now: float,
) -> FailoverPlan:
    """:func:`resilience.planner.plan`, waiting out a short shared cool-down of the route
    the plan would start with (see the module doc); the plain plan otherwise."""
    p = plan(role, policy, snapshot, facts, now)
    waits = short_waits(role, policy, snapshot, facts, now) if facts.wait_out_cooldowns else {}
    if not waits:
        return p
    lifted = snapshot.model_copy(
        update={
            "routes": {
                r: snapshot.get(r).model_copy(update={"cooldown_until": None}) for r in waits
            }
            | {r: h for r, h in snapshot.routes.items() if r not in waits}
        }
    )
    would = plan(role, policy, lifted, facts, now)
    first = would.attempts[0].route if would.attempts else None
    if first is None or first not in waits:
        return p
    wait_ms = waits[first]
    later = facts.model_copy(update={"elapsed_ms": facts.elapsed_ms + wait_ms})
    q = plan(role, policy, snapshot, later, now + wait_ms / 1000.0)
    if not q.attempts or q.attempts[0].route != first:
        return p
    why = f"{q.attempts[0].why}; waits {wait_ms:.0f} ms for a short Retry-After on it first"
    head = q.attempts[0].model_copy(update={"wait_ms": wait_ms, "why": why})
    note = f"waits {wait_ms:.0f} ms for {first}'s Retry-After: cheaper than failing over"
    return q.model_copy(update={"attempts": [head, *q.attempts[1:]], "notes": [*q.notes, note]})
