"""The rate-budget part of the Redis health store's façade (split along its seam).

Buckets are not replayed after an outage: while Redis is away each worker enforces every
budget alone in its local view (so N workers may together use up to N times it), and once
Redis is back the shared buckets, which refilled meanwhile, take over.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_failover.resilience.budget import BucketLevel, Scope
from agent_failover.stores.budgets import BudgetBuckets, BudgetGrant
from agent_failover.stores.redis_fallback import RedisFallback


class SharedBudgets:
    """``take_budget``, ``settle_budget`` and ``budget_levels`` over Redis, falling back to
    the local view; the store sets ``_budgets`` and ``_fallback``."""

    _budgets: BudgetBuckets
    _fallback: RedisFallback

    async def take_budget(
        self, scopes: Sequence[Scope], tokens: int, *, critical: bool, now: float
    ) -> BudgetGrant:
        """Reserve one request and ``tokens`` from every scope for all workers, or nothing."""
        return await self._fallback.run(
            lambda: self._budgets.take(scopes, tokens, critical=critical, now=now),
            lambda local: local.take_budget(scopes, tokens, critical=critical, now=now),
        )

    async def settle_budget(self, grant: BudgetGrant, actual_tokens: int, now: float) -> None:
        """Charge (or give back) the difference between the reservation and the usage."""
        await self._fallback.run(
            lambda: self._budgets.settle(grant, actual_tokens, now),
            lambda local: local.settle_budget(grant, actual_tokens, now),
        )

    async def budget_levels(self, scopes: Sequence[Scope], now: float) -> list[BucketLevel]:
        """Every bucket of ``scopes`` refilled to ``now``, as all workers share them."""
        return await self._fallback.run(
            lambda: self._budgets.levels(scopes, now),
            lambda local: local.budget_levels(scopes, now),
        )
