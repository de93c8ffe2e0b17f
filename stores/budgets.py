"""Rate-budget buckets in the health store: reserve before a call, settle after it.

A call draws from every scope :func:`resilience.budget.scopes_for` names (its endpoint,
then its role's bulkhead). :meth:`BudgetBuckets.take` takes one request and the token
estimate from each scope in turn, all the buckets of one scope atomically; if a later
scope refuses, what the earlier ones granted is given back, so a refused call costs
nothing. The grant remembers what it took so :meth:`BudgetBuckets.settle` can charge (or
give back) the difference between the estimate and the actual usage.

Two implementations share the arithmetic of :mod:`resilience.budget` and one contract
suite (``tests/stores/test_budgets_contract.py``): :class:`MemoryBudgets` (one process)
and :class:`~stores.redis_budgets.RedisBudgets` (every worker, one Lua script per scope).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent_failover.resilience.budget import (
    Bucket,
    BucketLevel,
    BucketState,
    BudgetUnit,
    Scope,
    Take,
    TakeResult,
    refill,
    settle,
    take,
    takes_for,
)


class BudgetGrant(BaseModel):
    """The answer to a take: granted (and what was reserved), or how long to wait."""

    model_config = ConfigDict(frozen=True)

    granted: bool
    wait_s: float = Field(default=0.0, ge=0.0)
    refused_by: str | None = Field(default=None, description="the scope that refused")
    reserved_tokens: int = 0
    scopes: list[Scope] = Field(default_factory=list, description="the scopes charged")

    @property
    def limited(self) -> bool:
        """True when the call drew from at least one budget."""
        return bool(self.scopes)


class ScopeBackend(Protocol):
    """The per-scope primitives a backend provides; :class:`BudgetBuckets` does the rest."""

    async def take_scope(
        self, scope: str, takes: list[Take], *, critical: bool, now: float
    ) -> TakeResult: ...

    async def adjust_scope(
        self, scope: str, adjusts: list[tuple[Bucket, float]], now: float
    ) -> None: ...

    async def read_scopes(self, scopes: Sequence[Scope], now: float) -> list[BucketLevel]: ...


class BudgetBuckets:
    """Multi-scope takes and settlements over a :class:`ScopeBackend`."""

    def __init__(self, backend: ScopeBackend) -> None:
        self._b = backend

    async def take(
        self, scopes: Sequence[Scope], tokens: int, *, critical: bool, now: float
    ) -> BudgetGrant:
        """One request and ``tokens`` from every scope, or nothing (see the module doc)."""
        done: list[Scope] = []
        for scope in scopes:
            takes = takes_for(scope, tokens)
            result = await self._b.take_scope(scope.name, takes, critical=critical, now=now)
            if not result.granted:
                for prev in reversed(done):
                    refund = [(t.bucket, -t.cost) for t in takes_for(prev, tokens)]
                    await self._b.adjust_scope(prev.name, refund, now)
                return BudgetGrant(granted=False, wait_s=result.wait_s, refused_by=scope.name)
            done.append(scope)
        return BudgetGrant(granted=True, reserved_tokens=tokens, scopes=done)

    async def settle(self, grant: BudgetGrant, actual_tokens: int, now: float) -> None:
        """Charge ``actual_tokens - reserved`` to every token bucket the grant drew from."""
        delta = float(actual_tokens - grant.reserved_tokens)
        if not grant.granted or delta == 0.0:
            return
        for scope in grant.scopes:
            adjusts = [(b, delta) for b in scope.buckets if b.unit is BudgetUnit.TOKENS]
            if adjusts:
                await self._b.adjust_scope(scope.name, adjusts, now)

    async def levels(self, scopes: Sequence[Scope], now: float) -> list[BucketLevel]:
        """Every bucket of ``scopes`` refilled to ``now`` (a never-used bucket is full)."""
        return await self._b.read_scopes(scopes, now)


class MemoryBudgets:
    """Buckets in one process (the memory store, and the Redis store's local view)."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], BucketState] = {}

    # No await between read and write: each method is atomic on the event loop.
    async def take_scope(
        self, scope: str, takes: list[Take], *, critical: bool, now: float
    ) -> TakeResult:
        keys = [(scope, t.bucket.unit.value) for t in takes]
        result = take(takes, [self._states.get(k) for k in keys], critical=critical, now=now)
        if result.granted:
            self._states.update(zip(keys, result.states, strict=True))
        return result

    async def adjust_scope(
        self, scope: str, adjusts: list[tuple[Bucket, float]], now: float
    ) -> None:
        for bucket, delta in adjusts:
            key = (scope, bucket.unit.value)
            self._states[key] = settle(bucket, self._states.get(key), delta, now)

    async def read_scopes(self, scopes: Sequence[Scope], now: float) -> list[BucketLevel]:
        out = []
        for scope in scopes:
            for b in scope.buckets:
                state = refill(b, self._states.get((scope.name, b.unit.value)), now)
                out.append(BucketLevel(scope=scope.name, bucket=b, level=state.level, at=state.at))
        return out
