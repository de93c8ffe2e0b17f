"""The values that cross layers: outcomes, health snapshots, attempts and agent outputs.

All are pydantic models so they travel through Temporal's pydantic data converter.
"""

# No ``from __future__ import annotations`` here: pydantic would compile every field's
# annotation string when the module loads, and workflow files import these types
# (bench/import_cost.py). Forward references are quoted instead.
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_failover.resilience.budget import BucketLevel
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.models import FinishReason, Reasoning, ToolCall, Usage


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"
    FORCED_OPEN = "forced_open"
    FORCED_CLOSED = "forced_closed"


class CallOutcome(BaseModel):
    """One observation of a route: a real call or a probe."""

    model_config = ConfigDict(defer_build=True)

    route: str
    at: float = Field(
        description="epoch seconds when the call finished (a probe: when it was sent)"
    )
    ok: bool
    error_class: ErrorClass | None = None
    latency_ms: float = Field(default=0.0, ge=0.0)
    ttft_ms: float | None = None
    semantic_failure: bool = False
    counts_against_route: bool = True
    retry_after_s: float | None = None
    probe: bool = False
    trial: bool = False  # a half-open trial call
    #: The trial slot lease the call held (``Admission.lease``): its outcome gives back
    #: exactly that one. None: the first to expire (older callers).
    trial_lease: str | None = None
    tokens: int = Field(
        default=0, ge=0, description="tokens the provider billed (input + output), when known"
    )
    cost_usd: float = Field(
        default=0.0,
        ge=0.0,
        description="what the attempt was billed: an answer, or a rejected whole body",
    )
    #: The role whose call this was (None for a probe): a role's SLA reads its own calls.
    role: str | None = None


class WindowStats(BaseModel):
    """Aggregates of one route over a rolling window."""

    model_config = ConfigDict(defer_build=True)

    window_s: float = 0.0
    calls: int = 0
    errors: int = 0
    semantic_failures: int = 0
    #: Calls that found every one of a worker's own connection slots to the route busy
    #: (``local_saturation``): shown to operators, never part of any rate or count above.
    local_saturations: int = 0
    slow_calls: int = 0
    error_rate: float = 0.0
    semantic_failure_rate: float = 0.0
    slow_call_rate: float = 0.0
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    enough_samples: bool = False
    probes: int = 0  # how many of ``calls`` were health probes (they feed latency stats too)
    latency_samples: int = 0  # how many latencies the percentiles were computed from
    #: Calls in the semantic window (the semantic rate's own minimum count is judged on it).
    semantic_calls: int = 0
    #: The p95 above which the latency breaker trips (factor x baseline p95), when known.
    p95_limit_ms: float | None = None


class RecentSample(BaseModel):
    """One recent observation of a route (call or probe), for streak-based SLA decisions."""

    model_config = ConfigDict(defer_build=True)

    at: float
    latency_ms: float
    ok: bool


class CostEfficiency(BaseModel):
    """One route's useful tokens and spend, current window and baseline, and its verdict."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    current_attempts: int = 0
    current_tokens: int = 0
    current_spend_usd: float = 0.0
    baseline_attempts: int = 0
    baseline_tokens: int = 0
    baseline_spend_usd: float = 0.0
    window_s: float = 0.0
    computed_at: float | None = None
    demoted: bool = False
    since: float | None = None

    @property
    def current_tokens_per_usd(self) -> float | None:
        """Useful tokens per dollar over the current window (None without spend)."""
        return _per_usd(self.current_tokens, self.current_spend_usd)

    @property
    def baseline_tokens_per_usd(self) -> float | None:
        """Useful tokens per dollar over the completed hours of the baseline."""
        return _per_usd(self.baseline_tokens, self.baseline_spend_usd)

    @property
    def share(self) -> float | None:
        """Current over baseline tokens per dollar (None when either is unknown)."""
        cur, base = self.current_tokens_per_usd, self.baseline_tokens_per_usd
        if cur is None or not base:
            return None
        return cur / base


def _per_usd(tokens: int, spend_usd: float) -> float | None:
    return tokens / spend_usd if spend_usd > 0.0 else None


class RouteHealth(BaseModel):
    """What the planner knows about one route at one instant."""

    model_config = ConfigDict(defer_build=True)

    route: str
    breaker: BreakerState = BreakerState.CLOSED
    open_until: float | None = None
    breaker_reason: str | None = None
    stats: WindowStats = Field(default_factory=WindowStats)
    role_stats: WindowStats | None = Field(
        default=None,
        description="latency of the snapshot role's own calls on the route plus its probes "
        "(what that role's SLA is judged on); None in a snapshot taken for no role",
    )
    sla_demoted: bool = False
    last_probe_at: float | None = None
    last_probe_ok: bool | None = None
    cooldown_until: float | None = Field(
        default=None, description="a 429's Retry-After: not planned or probed before this"
    )
    last_call_at: float | None = Field(
        default=None, description="when the last real (non-probe) call on the route finished"
    )
    context_window: int | None = Field(
        default=None, description="the window the provider stated when it rejected a prompt"
    )
    sla_since: float | None = Field(
        default=None, description="when the role's SLA verdict on this route last changed"
    )
    recent: list[RecentSample] = Field(
        default_factory=list,
        description="the newest observations that count against the route, oldest first",
    )
    budgets: list[BucketLevel] = Field(
        default_factory=list,
        description="the rate-budget buckets a call of the role on this route draws from",
    )
    quality_regressed: bool = Field(
        default=False,
        description="shadow evaluation found the role's answers on this route regressed",
    )
    quality_since: float | None = Field(
        default=None, description="when the role's quality verdict on this route last changed"
    )
    cost: CostEfficiency | None = Field(
        default=None,
        description="useful tokens per dollar now and over its 7-day baseline, and whether "
        "the route is demoted for it (read when the policy's cost_efficiency is enabled)",
    )


class HealthSnapshot(BaseModel):
    """Health of a set of routes, as read from the health store at ``taken_at``."""

    model_config = ConfigDict(defer_build=True)

    taken_at: float
    routes: dict[str, RouteHealth] = Field(default_factory=dict)
    store_degraded: bool = False  # the shared store was unreachable; this is a local view

    def get(self, route: str) -> RouteHealth:
        return self.routes.get(route) or RouteHealth(route=route)


class Capability(StrEnum):
    """What kind of answer a step got; anything but FULL is *degraded* (one meaning).

    FULL: a live answer from the role's intended model class, on its primary (tier 0) or
    a hot standby (tier 1: same model or an equivalent one in another region or at
    another provider). A tier-1 answer is a *substitution* (counted, flagged
    ``STANDBY_ROUTE``) but not a degradation. DEGRADED: a live answer from a smaller model
    (tier 2), a cached answer, or a full model that only saw a truncated context. STATIC:
    the role's schema-valid static fallback.
    """

    FULL = "full"
    DEGRADED = "degraded"
    STATIC = "static"


class ReasonCode(StrEnum):
    MODEL_UNAVAILABLE = "MODEL_UNAVAILABLE"
    BREAKER_OPEN = "BREAKER_OPEN"
    RATE_LIMITED = "RATE_LIMITED"
    LATENCY_BUDGET_EXCEEDED = "LATENCY_BUDGET_EXCEEDED"
    SLA_DEMOTED = "SLA_DEMOTED"
    QUALITY_REGRESSION = "QUALITY_REGRESSION"
    STREAM_INTERRUPTED = "STREAM_INTERRUPTED"
    SEMANTIC_FAILURE = "SEMANTIC_FAILURE"
    CONTEXT_TRUNCATED = "CONTEXT_TRUNCATED"
    #: Context that did not fit was summarized (on the cheapest healthy route), not dropped.
    CONTEXT_SUMMARIZED = "CONTEXT_SUMMARIZED"
    CONTEXT_TOO_LONG = "CONTEXT_TOO_LONG"
    CONTENT_FILTERED = "CONTENT_FILTERED"
    SMALLER_MODEL = "SMALLER_MODEL"
    STANDBY_ROUTE = "STANDBY_ROUTE"
    CACHED_RESPONSE = "CACHED_RESPONSE"
    STATIC_FALLBACK = "STATIC_FALLBACK"
    HEDGED = "HEDGED"
    PREFILL_CONTINUATION = "PREFILL_CONTINUATION"
    HUMAN_PROVIDED = "HUMAN_PROVIDED"
    ACCEPTED_DEGRADED = "ACCEPTED_DEGRADED"
    UPSTREAM_DEGRADED = "UPSTREAM_DEGRADED"
    INVALID_REQUEST = "INVALID_REQUEST"
    ESCALATED = "ESCALATED"
    RATE_BUDGET = "RATE_BUDGET"


#: Attempt outcomes that are not failures of a route.
NON_FAILURE_OUTCOMES = frozenset({"ok", "cancelled", "skipped", "miss", "pending"})


class AttemptRecord(BaseModel):
    """One step of the failover history: a route tried (or skipped) and how it went."""

    model_config = ConfigDict(defer_build=True)

    route: str
    tier: int
    started_at: float
    finished_at: float | None = None
    outcome: str = Field(description="'ok', 'skipped', 'cancelled' or an ErrorClass value")
    error: str | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    hedge: bool = False
    note: str = ""
    # The provider's own facts about a failed attempt, next to our error class (outcome).
    http_status: int | None = None
    provider_code: str | None = None
    retry_after_s: float | None = None
    #: The role's prompt variant this attempt was sent (``model:<m>``, ``provider:<p>``,
    #: ``default``, or ``caller`` when the request brought its own system prompt).
    prompt_variant: str | None = None
    #: How a JSON schema was asked for: ``native`` (the wire's schema support) or
    #: ``prompt`` (written into the prompt, the answer validated); None without a schema.
    structured_output: str | None = None


class AgentOutput(BaseModel):
    """A role's answer with its degradation contract."""

    model_config = ConfigDict(defer_build=True)

    role: str
    content: str
    data: dict[str, Any] | list[Any] | None = None
    capability: Capability
    tier: int = Field(ge=0, le=3)
    route: str | None = None
    model: str | None = None
    reason_codes: list[ReasonCode] = Field(default_factory=list)
    confidence: float = Field(ge=0.0, le=1.0)
    attempts: list[AttemptRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    cache_age_s: float | None = None
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="tool calls of the route that answered"
    )
    finish_reason: FinishReason | None = Field(
        default=None, description="why the answering route stopped (None: cache or static)"
    )
    refusal: str | None = Field(
        default=None, description="the provider's message when the answer is a content refusal"
    )
    reasoning: Reasoning | None = Field(
        default=None,
        description="reasoning state of the answering route's turn (thinking blocks, "
        "reasoning_content), to put on the assistant Message that records it",
    )

    @property
    def degraded(self) -> bool:
        """Not a full-capability answer (see :class:`Capability`); tier 1 is not degraded."""
        return self.capability is not Capability.FULL

    @property
    def refused(self) -> bool:
        """The model declined on content grounds (reason ``CONTENT_FILTERED``)."""
        return self.refusal is not None

    @property
    def substitutions(self) -> int:
        """Attempts that failed and forced a move to another route (skips are not counted)."""
        return sum(1 for a in self.attempts if a.outcome not in NON_FAILURE_OUTCOMES)
