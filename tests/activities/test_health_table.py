"""The `health_table` activity (what `failover status` shows): a degraded store is
reported with its error, and every route carries its context window."""

from __future__ import annotations

import httpx

from agent_failover.activities.health import HealthActivities
from agent_failover.activities.health_models import HealthTableInput
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore, RedisHealthStore
from agent_failover.stores.redis_link import fail_fast_client
from agent_failover.testing.servers import free_port

ROUTES = ["anthropic-us-east", "cheap-mini"]


def _acts(health, policy: PolicyConfig | None = None) -> HealthActivities:
    policy = policy or load_policy(DEFAULT_POLICY_PATH, env={"SIM_URL": "http://sim.test"})
    return LLMActivitySet(
        policy, httpx.AsyncClient(), health, MemoryResponseCache(), task_queue_for=lambda r: "q"
    ).health


async def test_lost_redis_is_reported_with_its_error() -> None:
    """Redis gone: the table still comes back (a local view), flagged and explained."""
    store = RedisHealthStore(fail_fast_client(f"redis://127.0.0.1:{free_port()}/0"), namespace="t")
    try:
        table = await _acts(store).health_table(HealthTableInput(routes=ROUTES, now=1000.0))
    finally:
        await store.close()
    assert table.store_degraded and table.store_error and table.store_degraded_since
    assert [r.route for r in table.rows] == ROUTES


async def test_context_windows_are_the_configured_ones_until_learned() -> None:
    table = await _acts(MemoryHealthStore()).health_table(
        HealthTableInput(routes=ROUTES, now=1000.0)
    )
    assert not table.store_degraded
    assert {r: (w.configured, w.learned) for r, w in table.context_windows.items()} == {
        "anthropic-us-east": (200_000, None),
        "cheap-mini": (32_000, None),
    }


async def test_a_learned_window_is_reported_beside_the_configured_one() -> None:
    """What the store learned from a provider's "maximum context length is N" shows up."""
    health = MemoryHealthStore()
    await health.learn_context_window("cheap-mini", 16_384, 999.0)
    table = await _acts(health).health_table(HealthTableInput(routes=ROUTES, now=1000.0))
    assert table.context_windows["cheap-mini"].learned == 16_384
    assert table.context_windows["cheap-mini"].effective == 16_384
    assert table.context_windows["anthropic-us-east"].learned is None


async def test_shadowed_roles_carry_their_quality_verdicts() -> None:
    """What the monitor's table holds for `failover status`: per shadowed role and roster
    route (not the reference) the stored verdict, the window's delta and its samples."""
    from agent_failover.resilience.config import ShadowSettings
    from agent_failover.resilience.shadow import QualitySample

    policy = load_policy(DEFAULT_POLICY_PATH, env={"SIM_URL": "http://sim.test"})
    shadow = ShadowSettings(reference_route="openai-us", min_samples=2, tolerance=0.25)
    role = policy.role("analyst").model_copy(update={"shadow": shadow})
    policy = policy.model_copy(update={"roles": {**policy.roles, "analyst": role}})
    health = MemoryHealthStore()
    acts = _acts(health, policy)
    await health.set_quality_regressed("analyst", "cheap-mini", True, at=900.0, delta=0.7)
    for at in (950.0, 960.0):
        await health.record_quality("analyst", "cheap-mini", QualitySample(at=at, score=0.4))
    table = await acts.health_table(HealthTableInput(routes=ROUTES, now=1000.0))
    assert [(q.role, q.route) for q in table.quality] == [
        ("analyst", "anthropic-us-east"),
        ("analyst", "cheap-mini"),
    ]
    row = table.quality[1]
    assert row.regressed and row.since == 900.0 and row.verdict_delta == 0.7
    assert (row.samples, row.min_samples) == (2, 2)
    assert abs(row.delta - 0.6) < 1e-9
    assert not table.quality[0].regressed and table.quality[0].samples == 0
