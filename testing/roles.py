"""Test roles derived from the demo policy, shared by tests, benchmarks and users' tests."""

from __future__ import annotations

from agent_failover.resilience.config import PolicyConfig


def with_test_roles(base: PolicyConfig, *, hedge_delay_ms: float = 200.0) -> PolicyConfig:
    """The policy plus three roles derived from ``analyst`` for tests and benchmarks.

    ``plain`` never hedges (one route at a time, so conduct is exact); ``hedged`` hedges
    after ``hedge_delay_ms``; ``tight-sla`` is ``plain`` with a 250/400 ms p95/p99 SLA.
    """
    analyst = base.role("analyst")
    plain = analyst.model_copy(
        update={"name": "plain", "hedging": analyst.hedging.model_copy(update={"enabled": False})}
    )
    hedged = analyst.model_copy(
        update={
            "name": "hedged",
            "hedging": analyst.hedging.model_copy(
                update={"enabled": True, "delay_ms": hedge_delay_ms, "max_hedges": 1}
            ),
        }
    )
    tight = plain.model_copy(
        update={
            "name": "tight-sla",
            "sla": plain.sla.model_copy(
                update={"p95_ms": 250.0, "p99_ms": 400.0, "min_samples": 4}
            ),
        }
    )
    roles = {**base.roles, "plain": plain, "hedged": hedged, "tight-sla": tight}
    return base.model_copy(update={"roles": roles})
