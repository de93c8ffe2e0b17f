"""The failover plan as values: what the planner is told about a call and what it answers.

:class:`RequestFacts` is what the planner needs to know about the request and the call so
far (tokens, time spent, routes excluded, cool-downs, the window a context-length failure
asked for, the half-open trial draw). :class:`FailoverPlan` is its answer: the ordered
:class:`PlannedAttempt` list with each attempt's budgets and the reason it is where it is,
every :class:`SkippedRoute` with its :class:`SkipReason`, and the cache tier and static
fallback that close every plan; :meth:`FailoverPlan.explain` prints it for people. The
rules that build a plan are :mod:`resilience.planner`.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from agent_failover.resilience.config import CacheTier, StaticFallback


class RequestFacts(BaseModel):
    """What the planner needs to know about the request and the call so far."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(ge=0)
    max_output_tokens: int = Field(ge=1)
    elapsed_ms: float = Field(default=0.0, ge=0.0, description="budget already spent")
    exclude_routes: list[str] = Field(
        default_factory=list,
        description="routes that already failed with a content-filter or stop-class error",
    )
    min_context_window: int = Field(
        default=0, ge=0, description="set after a context-length failure"
    )
    cooldowns: dict[str, float] = Field(
        default_factory=dict, description="route -> epoch seconds before which it is not called"
    )
    min_input_tokens: int | None = Field(
        default=None,
        ge=0,
        description=(
            "tokens left after the most aggressive triage (resilience.triage."
            "minimal_input_tokens); None = unknown, assume triage can reach any target"
        ),
    )
    wait_out_cooldowns: bool = Field(
        default=True,
        description=(
            "wait out a short shared cool-down (another request's 429, e.g. a probe's) "
            "when the rate-limit rule says waiting fits this call (resilience.ratelimit."
            "shared_cooldown_wait_ms); False: skip every cooling route (runs recorded before)"
        ),
    )
    tiers_tried: list[int] = Field(
        default_factory=list,
        description="live tiers this call already made an attempt on (the floor rule gives "
        "each other tier one attempt once the budget is spent)",
    )
    live_tier_floor: bool = Field(
        default=True,
        description="apply the role's live-tier floor; off only to replay runs recorded "
        "before the rule existed",
    )
    trial_ticket: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description=(
            "uniform draw for this call: half-open routes take it as a real-call trial "
            "when ticket < breaker.half_open_call_fraction"
        ),
    )


class SkipReason(StrEnum):
    """Machine-readable kind of a :class:`SkippedRoute`."""

    EXCLUDED = "excluded"
    FORCED_OPEN = "forced_open"
    BREAKER_OPEN = "breaker_open"
    COOLING_DOWN = "cooling_down"
    HALF_OPEN = "half_open"
    SLA_DEMOTED = "sla_demoted"
    QUALITY_REGRESSION = "quality_regression"
    CONTEXT_TOO_SMALL = "context_too_small"
    NO_BUDGET = "no_budget"
    RATE_BUDGET = "rate_budget"
    #: Measured below the role's min_quality by `failover qualify` (the lock file).
    UNQUALIFIED = "unqualified"


class PlannedAttempt(BaseModel):
    """One call the workflow should make, with its budgets and why it is where it is."""

    model_config = ConfigDict(frozen=True)

    route: str
    tier: int = Field(ge=0, le=2)
    start_offset_ms: float = Field(
        default=0.0, ge=0.0, description="0 sequential; >0 hedge started after the previous"
    )
    timeout_ms: float = Field(gt=0.0)
    ttft_budget_ms: float = Field(gt=0.0)
    idle_budget_ms: float = Field(gt=0.0)
    hedge: bool = False
    needs_triage: bool = False
    target_input_tokens: int | None = None
    score: float
    why: str
    trial: bool = False  # the route is half-open: this call is one of its trials
    sla_demoted: bool = False
    worst_case_start_ms: float = Field(
        default=0.0, ge=0.0, description="latest this attempt can start, from plan time"
    )
    wait_ms: float = Field(
        default=0.0,
        ge=0.0,
        description="wait this long before the attempt: what is left of a short Retry-After "
        "another request met on the route",
    )
    floor: bool = Field(
        default=False,
        description="the tier's guaranteed attempt (live_tier_floor_ms) past the budget",
    )


class SkippedRoute(BaseModel):
    """A roster route the plan does not call now (or, for SLA, moved to the back)."""

    model_config = ConfigDict(frozen=True)

    route: str
    tier: int
    reason: str
    code: SkipReason


class FailoverPlan(BaseModel):
    """The ordered attempts for one agent call, ending in the cache and static tiers."""

    model_config = ConfigDict(frozen=True)

    role: str
    attempts: list[PlannedAttempt] = Field(default_factory=list)
    skipped: list[SkippedRoute] = Field(default_factory=list)
    cache: CacheTier | None = None
    static: StaticFallback
    budget_ms: float
    remaining_ms: float
    hedge_delay_ms: float | None = None
    notes: list[str] = Field(default_factory=list)

    def explain(self) -> list[str]:
        """Human-readable lines: attempts in order, skipped routes, cache and static."""
        lines = [
            f"plan for role {self.role!r}: budget {self.budget_ms:.0f} ms, "
            f"{self.remaining_ms:.0f} ms left"
        ]
        lines += [f"  note: {n}" for n in self.notes]
        for i, a in enumerate(self.attempts, 1):
            flags = [
                f for f, on in (("HEDGE", a.hedge), ("TRIAL", a.trial), ("FLOOR", a.floor)) if on
            ]
            when = f"+{a.start_offset_ms:.0f} ms" if a.hedge else "sequential"
            flag_txt = f" [{' '.join(flags)}]" if flags else ""
            lines.append(
                f"  {i}. tier{a.tier} {a.route}{flag_txt} {when}, timeout {a.timeout_ms:.0f} ms, "
                f"ttft {a.ttft_budget_ms:.0f} ms, score {a.score:.2f}: {a.why}"
            )
        for s in self.skipped:
            lines.append(f"  skip tier{s.tier} {s.route}: {s.reason}")
        n = len(self.attempts) + 1
        if self.cache is not None:
            lines.append(
                f"  {n}. cache: fresh for {self.cache.ttl_s:.0f} s, served up to "
                f"{self.cache.max_staleness_s:.0f} s old"
            )
            n += 1
        preview = (
            self.static.content
            if len(self.static.content) <= 60
            else self.static.content[:57] + "..."
        )
        lines.append(f"  {n}. static fallback: {preview!r}")
        return lines
