"""Rate budgets: requests- and tokens-per-minute token buckets, as pure values.

A *scope* is one endpoint (``endpoint:<route>``) or one bulkhead (``bulkhead:<name>``)
with a :class:`~resilience.config.RateBudget`. Each scope has up to two buckets (requests
and tokens). A bucket holds at most one minute of its rate (its ``capacity``) and refills
continuously at ``capacity / 60`` per second, so a full bucket allows a burst of one
minute's budget and the long-run rate never exceeds the configured one.

Priority: a budget may keep a ``reserve`` (a share of its capacity). A call of a role that
is not ``critical`` is only granted while the bucket stays at or above the reserve after
the take; a critical role may use the whole bucket. Failover traffic from ordinary roles
therefore cannot drain the quota a critical role needs, and a standby's budget caps how
much failover traffic it receives.

Tokens are reserved before the call (an estimate) and settled afterwards with the actual
usage (:func:`settle`): the difference is given back or charged. A level may go below
zero (a call that used more than its estimate): the debt is repaid by the refill before
anything else is granted. A call bigger than the whole bucket (above the reserve) is
granted when the bucket is full, so it is delayed, never refused forever.

The Redis store runs the same arithmetic in Lua (``stores/redis_budgets.py``) and the
memory store calls these functions; the store contract suite checks they agree. Pure: no
IO, no clock reads (``now`` is an argument).
"""

# No ``from __future__ import annotations`` here: pydantic would compile every field's
# annotation string when the module loads, and workflow files import these types
# (bench/import_cost.py). Forward references are quoted instead.
import math
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:  # the policy's model graph: not loaded with the result types (contracts)
    from agent_failover.resilience.config import PolicyConfig, RateBudget

#: A bucket holds one minute of its rate.
WINDOW_S = 60.0


class BudgetUnit(StrEnum):
    """What a bucket counts."""

    REQUESTS = "requests"
    TOKENS = "tokens"


class Bucket(BaseModel):
    """One bucket's configuration: capacity per minute and the share kept in reserve."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    unit: BudgetUnit
    capacity: float = Field(gt=0.0, description="per minute; also the largest burst")
    reserve: float = Field(default=0.0, ge=0.0, description="units only critical roles may use")

    @property
    def per_s(self) -> float:
        return self.capacity / WINDOW_S

    def floor(self, critical: bool) -> float:
        """The level a take must leave behind (0 for a critical role)."""
        return 0.0 if critical else self.reserve


class BucketState(BaseModel):
    """A bucket's level at ``at`` (a fresh bucket is full)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    level: float
    at: float


def refill(bucket: Bucket, state: BucketState | None, now: float) -> BucketState:
    """The state at ``now``: refilled since ``state.at``, capped at capacity.

    A ``now`` earlier than ``state.at`` (another worker's clock ran ahead) refills nothing.
    """
    if state is None:
        return BucketState(level=bucket.capacity, at=now)
    dt = max(now - state.at, 0.0)
    return BucketState(
        level=min(bucket.capacity, state.level + dt * bucket.per_s), at=max(now, state.at)
    )


def needed(bucket: Bucket, cost: float, critical: bool) -> float:
    """The level a take of ``cost`` needs (a cost above the usable part needs a full bucket)."""
    floor = bucket.floor(critical)
    return floor + min(cost, bucket.capacity - floor)


def wait_s(bucket: Bucket, level: float, cost: float, critical: bool) -> float:
    """Seconds of refill before ``cost`` can be taken from ``level`` (0: now)."""
    short = needed(bucket, cost, critical) - level
    if short <= 1e-9:
        return 0.0
    return short / bucket.per_s


class Take(BaseModel):
    """One unit's share of a grant: ``cost`` from ``bucket``."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    bucket: Bucket
    cost: float = Field(ge=0.0)


class TakeResult(BaseModel):
    """The outcome of taking several buckets of one scope at once (all or none)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    granted: bool
    wait_s: float = Field(default=0.0, ge=0.0, description="refill time until it would fit")
    states: list[BucketState]


def take(
    takes: list[Take], states: list[BucketState | None], *, critical: bool, now: float
) -> TakeResult:
    """Take every ``takes[i].cost`` from its bucket, or nothing if any is short.

    ``states[i]`` is bucket i's stored state (None: never used). The returned states are
    the refilled ones, minus the costs when granted.
    """
    fresh = [refill(t.bucket, s, now) for t, s in zip(takes, states, strict=True)]
    waits = [wait_s(t.bucket, s.level, t.cost, critical) for t, s in zip(takes, fresh, strict=True)]
    longest = max(waits, default=0.0)
    if longest > 0.0:
        return TakeResult(granted=False, wait_s=longest, states=fresh)
    taken = [
        BucketState(level=s.level - t.cost, at=s.at) for t, s in zip(takes, fresh, strict=True)
    ]
    return TakeResult(granted=True, states=taken)


def settle(bucket: Bucket, state: BucketState | None, delta: float, now: float) -> BucketState:
    """Charge ``delta`` more (actual minus reserved; negative gives back), capped at capacity."""
    fresh = refill(bucket, state, now)
    return BucketState(level=min(bucket.capacity, fresh.level - delta), at=fresh.at)


class BucketLevel(BaseModel):
    """A bucket as a snapshot reports it: enough for the planner to predict a take."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    scope: str
    bucket: Bucket
    level: float
    at: float

    def wait_s(self, cost: float, *, critical: bool, now: float) -> float:
        """Seconds until ``cost`` fits, projecting the refill from ``at`` to ``now``."""
        level = refill(self.bucket, BucketState(level=self.level, at=self.at), now).level
        return wait_s(self.bucket, level, cost, critical)

    def describe(self) -> str:
        return (
            f"{self.scope} {self.bucket.unit.value} {max(self.level, 0.0):.0f}/"
            f"{self.bucket.capacity:.0f} per min"
            + (f" (reserve {self.bucket.reserve:.0f})" if self.bucket.reserve else "")
        )


def budget_wait(
    levels: list[BucketLevel], *, tokens: int, critical: bool, now: float
) -> tuple[float, BucketLevel | None]:
    """The longest wait among ``levels`` for one request of ``tokens``, and its bucket."""
    worst: tuple[float, BucketLevel | None] = (0.0, None)
    for lv in levels:
        cost = 1.0 if lv.bucket.unit is BudgetUnit.REQUESTS else float(tokens)
        w = lv.wait_s(cost, critical=critical, now=now)
        if w > worst[0]:
            worst = (w, lv)
    return worst


def ceil_ms(seconds: float) -> float:
    """``seconds`` rounded up to the millisecond (waits are reported in whole ms)."""
    return math.ceil(seconds * 1000.0) / 1000.0


class Scope(BaseModel):
    """One budgeted scope (``endpoint:<route>`` or ``bulkhead:<name>``) and its buckets."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    buckets: list[Bucket]


def buckets_of(budget: "RateBudget") -> list[Bucket]:
    """The budget's buckets: requests first, then tokens (whichever are set)."""
    out = []
    for unit, per_min in (
        (BudgetUnit.REQUESTS, budget.requests_per_minute),
        (BudgetUnit.TOKENS, budget.tokens_per_minute),
    ):
        if per_min is not None:
            out.append(Bucket(unit=unit, capacity=float(per_min), reserve=per_min * budget.reserve))
    return out


def scopes_for(policy: "PolicyConfig", role: str, route: str) -> list[Scope]:
    """The budgets a call of ``role`` on ``route`` draws from: the endpoint's, then the
    bulkhead's (only those configured)."""
    out = []
    ep = policy.rate_budgets.endpoints.get(route)
    if ep is not None:
        out.append(Scope(name=f"endpoint:{route}", buckets=buckets_of(ep)))
    bulkhead = policy.role(role).bulkhead
    bh = policy.rate_budgets.bulkheads.get(bulkhead)
    if bh is not None:
        out.append(Scope(name=f"bulkhead:{bulkhead}", buckets=buckets_of(bh)))
    return out


def all_scopes(policy: "PolicyConfig") -> list[Scope]:
    """Every budgeted scope of the policy: endpoints, then bulkheads (for status tables)."""
    out = [
        Scope(name=f"endpoint:{r}", buckets=buckets_of(b))
        for r, b in sorted(policy.rate_budgets.endpoints.items())
    ]
    out += [
        Scope(name=f"bulkhead:{n}", buckets=buckets_of(b))
        for n, b in sorted(policy.rate_budgets.bulkheads.items())
    ]
    return out


def takes_for(scope: Scope, tokens: int) -> list[Take]:
    """One request and ``tokens`` tokens, for each bucket of ``scope``."""
    return [
        Take(bucket=b, cost=1.0 if b.unit is BudgetUnit.REQUESTS else float(tokens))
        for b in scope.buckets
    ]
