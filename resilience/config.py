"""The failover policy as validated pydantic models (pure: parsing and checks, no IO).

A policy names the endpoints (routes), the breaker and probe settings shared by all
routes (with per-endpoint overrides), the scoring weights and, per agent role, its
latency SLA, budgets, hedging and tiered roster ending in a cache tier and a static,
schema-valid fallback. Every model forbids unknown keys and validates on construction,
so a bad ``policy.yaml`` fails at start-up with a :class:`PolicyError` that lists each
problem with its field path (``roles.critic.roster.tier1[0]: unknown endpoint 'gpt-x'``).
Every default is a named ``DEFAULT_*`` constant; the README's "Policy reference" documents
each field with its default and range. :func:`describe_policy` summarises a policy for
``failover config check``. No IO here: reading a file is ``agent_failover.config.loader``.
"""

from __future__ import annotations

import json
import math
import os
import re
import typing
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.limits import MAX_REPLY_BYTES_LIMIT
from agent_failover.resilience.qualification import (
    QualificationLock,
    RoleQualification,
    threshold,
    unqualified_reason,
)
from agent_failover.resilience.quality import ScorerSpec

# --- breaker defaults (resilience4j-style seeds) -------------------------------------
DEFAULT_ERROR_RATE_THRESHOLD = 0.15
DEFAULT_ERROR_WINDOW_S = 30.0
DEFAULT_MIN_CALLS = 10
DEFAULT_SLOW_CALL_MS: float | None = None
DEFAULT_SLOW_CALL_BASELINE_FACTOR = 3.0
DEFAULT_SLOW_CALL_RATE_THRESHOLD = 0.5
DEFAULT_SEMANTIC_FAILURE_THRESHOLD = 0.10
DEFAULT_SEMANTIC_WINDOW_S = 60.0
DEFAULT_OPEN_DURATION_S = 30.0
DEFAULT_OPEN_DURATION_MULTIPLIER = 2.0
DEFAULT_MAX_OPEN_DURATION_S = 300.0
DEFAULT_HALF_OPEN_MAX_TRIALS = 3
DEFAULT_CLOSE_AFTER_CONSECUTIVE_SUCCESSES = 3
DEFAULT_TRIAL_LATENCY_MS: float | None = None  # None: the TTFT budget of the roles using the route
#: Share of real calls that may be half-open trials; 0 = only probes trial a half-open route.
DEFAULT_HALF_OPEN_CALL_FRACTION = 0.0
#: Failures in a row (counting against the route, 429s excluded) that open a closed
#: breaker whatever its window's error rate: Envoy outlier detection's consecutive_5xx.
DEFAULT_CONSECUTIVE_FAILURES: int | None = 5
#: Of those, time-budget failures in a row (first token, stalled stream, no response)
#: that open it: each cost its caller the whole budget, and while the first one waits
#: out its budget, rate x budget more calls are already on their way to the route.
DEFAULT_CONSECUTIVE_TIMEOUTS: int | None = 3
#: Seconds after closing during which one failure re-opens (None: ``open_duration_s``).
DEFAULT_PROBATION_S: float | None = None

# --- rate limits (429) -----------------------------------------------------------------
#: Longest Retry-After worth waiting for on the same route instead of failing over.
DEFAULT_RATE_LIMIT_MAX_WAIT_MS = 2_000.0
#: Cool-down of a route that answered 429 without saying how long to wait.
DEFAULT_RATE_LIMIT_COOLDOWN_S = 10.0

# --- probes, hysteresis, scoring -------------------------------------------------------
DEFAULT_PROBE_INTERVAL_S = 12.0
MIN_PROBE_INTERVAL_S = 1.0
#: Half-open routes are probed this many times faster than the probe interval, so the
#: close_after_consecutive_successes good probes take a fraction of an interval.
HALF_OPEN_PROBE_SPEEDUP = 4.0
MAX_PROBE_INTERVAL_S = 3600.0
DEFAULT_PROBE_TIMEOUT_S = 10.0
DEFAULT_PROBE_MAX_TOKENS = 8
DEFAULT_HYSTERESIS_MARGIN = 0.8
DEFAULT_WEIGHT_HEALTH = 0.5
DEFAULT_WEIGHT_LATENCY = 0.3
DEFAULT_WEIGHT_COST = 0.2
WEIGHT_SUM_TOLERANCE = 1e-6

# --- role defaults ----------------------------------------------------------------------
DEFAULT_SLA_P95_MS = 10_000.0
DEFAULT_SLA_P99_MS = 20_000.0
DEFAULT_SLA_WINDOW_S = 60.0
DEFAULT_SLA_MIN_SAMPLES = 10
#: Consecutive good observations (probes or calls) that restore a latency-demoted route.
DEFAULT_SLA_RESTORE_AFTER = 3
#: Most observations the restore / re-demote streaks may need (bounded: they travel in history).
MAX_SLA_STREAK = 16
DEFAULT_TTFT_BUDGET_MS = 5_000.0
DEFAULT_TOTAL_BUDGET_MS = 60_000.0
DEFAULT_HEDGE_MAX_HEDGES = 1
DEFAULT_HEDGE_MIN_DELAY_MS = 50.0
DEFAULT_CACHE_TTL_S = 3_600.0
DEFAULT_CACHE_MAX_STALENESS_S = 86_400.0
#: Largest reply a role accepts; bigger ones fail as ``oversized_output`` and fail over.
DEFAULT_MAX_REPLY_BYTES = 256 * 1024
MIN_REPLY_BYTES = 1024
#: Confidence below which a critical role's answer escalates (0: only the static fallback).
DEFAULT_MIN_CONFIDENCE = 0.0
#: Verdicts a static fallback may never carry: it answers when nothing could review.
APPROVING_VERDICTS = frozenset({"approve", "approved", "accept", "accepted", "pass", "lgtm"})
DEFAULT_POLICY_VERSION = 1
#: Bulkhead (own task queue and activity slots) of roles that do not name one.
DEFAULT_BULKHEAD = "core"
#: Longest system prompt (or few-shot text) one prompt variant may hold: it enters history.
MAX_PROMPT_CHARS = 16_000
#: Most prompt variants (models plus providers) one role may define.
MAX_PROMPT_VARIANTS = 32
#: Most few-shot examples one variant may carry.
MAX_FEW_SHOT = 8
#: Time the summarization of dropped context may take before plain triage is used instead.
DEFAULT_SUMMARIZE_BUDGET_MS = 3_000.0
#: Tokens the summary of dropped context may use.
DEFAULT_SUMMARIZE_MAX_TOKENS = 256

# --- shadow evaluation and degraded re-runs (issue 14) ------------------------------------
DEFAULT_SHADOW_SAMPLE_FRACTION = 0.05
#: Largest drop of agreement with the reference route (1 - mean agreement) tolerated.
DEFAULT_SHADOW_TOLERANCE = 0.25
DEFAULT_SHADOW_WINDOW_S = 600.0
DEFAULT_SHADOW_MIN_SAMPLES = 20
#: Consecutive agreeing shadow samples that restore a quality-demoted route.
DEFAULT_SHADOW_RESTORE_AFTER = 3
DEFAULT_SHADOW_TIMEOUT_S = 60.0
#: Most shadow samples kept per route and role (bounds the store and the streak reads).
MAX_QUALITY_SAMPLES = 64
DEFAULT_RERUN_WINDOW_S = 600.0
DEFAULT_RERUN_CHECK_INTERVAL_S = 15.0
#: Agreement below which a re-run "disagrees materially" with the degraded answer.
DEFAULT_RERUN_MIN_AGREEMENT = 0.7

_STRICT = ConfigDict(extra="forbid", frozen=True)


class PolicyError(Exception):
    """A policy that cannot be used, with every problem found and its field path.

    ``errors`` holds ``(field_path, message)`` pairs; ``str()`` prints one per line so
    the CLI and the worker's start-up failure show all problems at once.
    """

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = list(errors) or [("<policy>", "invalid policy")]
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(f"{path}: {msg}" if path else msg for path, msg in self.errors)


class UnknownNameError(PolicyError, KeyError):
    """A lookup of a role or endpoint the policy does not define (also a ``KeyError``)."""

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message; keep PolicyError's "path: message".
        return PolicyError.__str__(self)


class BreakerSettings(BaseModel):
    """When a route's circuit breaker trips, how long it stays open and how it recovers."""

    model_config = _STRICT

    error_rate_threshold: float = Field(default=DEFAULT_ERROR_RATE_THRESHOLD, gt=0.0, le=1.0)
    error_window_s: float = Field(default=DEFAULT_ERROR_WINDOW_S, gt=0.0, le=3600.0)
    min_calls: int = Field(default=DEFAULT_MIN_CALLS, ge=1, le=10_000)
    slow_call_ms: float | None = Field(default=DEFAULT_SLOW_CALL_MS, gt=0.0)
    slow_call_baseline_factor: float = Field(
        default=DEFAULT_SLOW_CALL_BASELINE_FACTOR, ge=1.0, le=100.0
    )
    slow_call_rate_threshold: float = Field(
        default=DEFAULT_SLOW_CALL_RATE_THRESHOLD, gt=0.0, le=1.0
    )
    semantic_failure_threshold: float = Field(
        default=DEFAULT_SEMANTIC_FAILURE_THRESHOLD, gt=0.0, le=1.0
    )
    semantic_window_s: float = Field(default=DEFAULT_SEMANTIC_WINDOW_S, gt=0.0, le=3600.0)
    open_duration_s: float = Field(default=DEFAULT_OPEN_DURATION_S, gt=0.0, le=86_400.0)
    open_duration_multiplier: float = Field(
        default=DEFAULT_OPEN_DURATION_MULTIPLIER, ge=1.0, le=10.0
    )
    max_open_duration_s: float = Field(default=DEFAULT_MAX_OPEN_DURATION_S, gt=0.0, le=86_400.0)
    half_open_max_trials: int = Field(default=DEFAULT_HALF_OPEN_MAX_TRIALS, ge=1, le=100)
    close_after_consecutive_successes: int = Field(
        default=DEFAULT_CLOSE_AFTER_CONSECUTIVE_SUCCESSES, ge=1, le=100
    )
    trial_latency_ms: float | None = Field(default=DEFAULT_TRIAL_LATENCY_MS, gt=0.0)
    half_open_call_fraction: float = Field(default=DEFAULT_HALF_OPEN_CALL_FRACTION, ge=0.0, le=1.0)
    consecutive_failures: int | None = Field(default=DEFAULT_CONSECUTIVE_FAILURES, ge=1, le=10_000)
    consecutive_timeouts: int | None = Field(default=DEFAULT_CONSECUTIVE_TIMEOUTS, ge=1, le=10_000)
    probation_s: float | None = Field(default=DEFAULT_PROBATION_S, ge=0.0, le=86_400.0)

    @model_validator(mode="after")
    def _check_durations(self) -> BreakerSettings:
        if self.max_open_duration_s < self.open_duration_s:
            raise ValueError(
                f"max_open_duration_s ({self.max_open_duration_s}) must be >= "
                f"open_duration_s ({self.open_duration_s})"
            )
        return self

    def open_duration_for(self, trips: int) -> float:
        """Seconds a breaker stays open on its ``trips``-th consecutive trip (1-based).

        Grows geometrically so a route that keeps failing its trials is probed less
        often, capped so it is never forgotten.
        """
        exponent = max(trips, 1) - 1
        # Cap the exponent before pow so a long outage cannot overflow the float.
        if self.open_duration_multiplier > 1.0:
            limit = math.log(self.max_open_duration_s / self.open_duration_s) / math.log(
                self.open_duration_multiplier
            )
            exponent = min(exponent, math.ceil(limit))
        duration = self.open_duration_s * self.open_duration_multiplier**exponent
        return min(duration, self.max_open_duration_s)

    def probation(self) -> float:
        """Seconds after a close by good trials during which one failure re-opens."""
        return self.open_duration_s if self.probation_s is None else self.probation_s


class BreakerOverride(BaseModel):
    """Per-endpoint breaker settings: every field optional, merged over ``breaker``."""

    model_config = _STRICT

    error_rate_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    error_window_s: float | None = Field(default=None, gt=0.0, le=3600.0)
    min_calls: int | None = Field(default=None, ge=1, le=10_000)
    slow_call_ms: float | None = Field(default=None, gt=0.0)
    slow_call_baseline_factor: float | None = Field(default=None, ge=1.0, le=100.0)
    slow_call_rate_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    semantic_failure_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    semantic_window_s: float | None = Field(default=None, gt=0.0, le=3600.0)
    open_duration_s: float | None = Field(default=None, gt=0.0, le=86_400.0)
    open_duration_multiplier: float | None = Field(default=None, ge=1.0, le=10.0)
    max_open_duration_s: float | None = Field(default=None, gt=0.0, le=86_400.0)
    half_open_max_trials: int | None = Field(default=None, ge=1, le=100)
    close_after_consecutive_successes: int | None = Field(default=None, ge=1, le=100)
    trial_latency_ms: float | None = Field(default=None, gt=0.0)
    half_open_call_fraction: float | None = Field(default=None, ge=0.0, le=1.0)
    consecutive_failures: int | None = Field(default=None, ge=1, le=10_000)
    consecutive_timeouts: int | None = Field(default=None, ge=1, le=10_000)
    probation_s: float | None = Field(default=None, ge=0.0, le=86_400.0)

    def apply(self, base: BreakerSettings) -> BreakerSettings:
        """Return ``base`` with the fields set in this override replaced (and re-validated)."""
        merged = base.model_dump()
        # exclude_none, not exclude_unset: the policy travels through Temporal as JSON,
        # where every field comes back "set" (to null), and null means "inherit".
        merged.update(self.model_dump(exclude_none=True))
        return BreakerSettings.model_validate(merged)


class LatencySLA(BaseModel):
    """A role's latency objective; a route breaching it is demoted before it times out."""

    model_config = _STRICT

    p95_ms: float = Field(default=DEFAULT_SLA_P95_MS, gt=0.0)
    p99_ms: float = Field(default=DEFAULT_SLA_P99_MS, gt=0.0)
    window_s: float = Field(default=DEFAULT_SLA_WINDOW_S, gt=0.0, le=3600.0)
    min_samples: int = Field(default=DEFAULT_SLA_MIN_SAMPLES, ge=1, le=10_000)
    restore_after: int = Field(default=DEFAULT_SLA_RESTORE_AFTER, ge=1, le=MAX_SLA_STREAK)

    @model_validator(mode="after")
    def _check_order(self) -> LatencySLA:
        if self.p99_ms < self.p95_ms:
            raise ValueError(f"p99_ms ({self.p99_ms}) must be >= p95_ms ({self.p95_ms})")
        return self


class HedgeSettings(BaseModel):
    """Whether a stateless role starts the next route before the current one answers.

    The delay is ``delay_ms`` when set, else the primary's measured TTFT p95, clamped to
    ``[min_delay_ms, max_delay_ms]`` (``max_delay_ms`` None = the role's TTFT budget).
    """

    model_config = _STRICT

    enabled: bool = False
    delay_ms: float | None = Field(default=None, gt=0.0)
    max_hedges: int = Field(default=DEFAULT_HEDGE_MAX_HEDGES, ge=0, le=4)
    min_delay_ms: float = Field(default=DEFAULT_HEDGE_MIN_DELAY_MS, ge=0.0)
    max_delay_ms: float | None = Field(default=None, gt=0.0)

    @model_validator(mode="after")
    def _check_clamp(self) -> HedgeSettings:
        if self.max_delay_ms is not None and self.max_delay_ms < self.min_delay_ms:
            raise ValueError(
                f"max_delay_ms ({self.max_delay_ms}) must be >= min_delay_ms ({self.min_delay_ms})"
            )
        return self


class CacheTier(BaseModel):
    """The degraded tier that serves a previous good answer for the same request."""

    model_config = _STRICT

    enabled: bool = True
    ttl_s: float = Field(default=DEFAULT_CACHE_TTL_S, gt=0.0)
    max_staleness_s: float = Field(default=DEFAULT_CACHE_MAX_STALENESS_S, gt=0.0)

    @model_validator(mode="after")
    def _check_staleness(self) -> CacheTier:
        if self.max_staleness_s < self.ttl_s:
            raise ValueError(
                f"max_staleness_s ({self.max_staleness_s}) must be >= ttl_s ({self.ttl_s})"
            )
        return self


class StaticFallback(BaseModel):
    """The last answer: fixed text and, for structured roles, data valid for the schema."""

    model_config = _STRICT

    content: str = Field(min_length=1)
    data: dict[str, Any] | list[Any] | None = None


class ContentFilterMode(StrEnum):
    """What a content-filter refusal does (policy ``content_filter``, per-call override)."""

    #: Return the refusal to the caller as a typed answer (reason ``CONTENT_FILTERED``).
    REFUSE = "refuse"
    #: Try a different model (never the same model in another region).
    FAILOVER = "failover"


class Roster(BaseModel):
    """A role's routes by tier, then its cache tier and static fallback (tier 3)."""

    model_config = _STRICT

    tier0: list[str] = Field(min_length=1)
    tier1: list[str] = Field(default_factory=list)
    tier2: list[str] = Field(default_factory=list)
    cache: CacheTier = Field(default_factory=CacheTier)
    static: StaticFallback

    @model_validator(mode="after")
    def _check_unique(self) -> Roster:
        seen: set[str] = set()
        for route in self.routes():
            if route in seen:
                raise ValueError(f"route {route!r} appears more than once in the roster")
            seen.add(route)
        return self

    def tiers(self) -> list[tuple[int, list[str]]]:
        """The live tiers in order: ``[(0, tier0), (1, tier1), (2, tier2)]``."""
        return [(0, list(self.tier0)), (1, list(self.tier1)), (2, list(self.tier2))]

    def routes(self) -> list[str]:
        """Every live route in tier order."""
        return [*self.tier0, *self.tier1, *self.tier2]

    def tier_of(self, route: str) -> int | None:
        """The tier a route is listed in, or None if it is not in this roster."""
        for tier, routes in self.tiers():
            if route in routes:
                return tier
        return None


class FewShotExample(BaseModel):
    """One worked example shown to the model in the system prompt (input, then answer)."""

    model_config = _STRICT

    user: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    assistant: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)


class PromptVariant(BaseModel):
    """A role's system prompt for one model or provider (None: the role's default text)."""

    model_config = _STRICT

    system_prompt: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    few_shot: list[FewShotExample] = Field(default_factory=list, max_length=MAX_FEW_SHOT)


class PromptRegistry(BaseModel):
    """Per-role prompt variants: the default few-shot block, then overrides.

    A call on a route uses the variant of the route's model (``models``, keyed by the
    endpoint's ``model`` or ``model_family``), else of its provider (``providers``,
    keyed by ``provider_name`` or ``provider``), else the role's default
    (``system_prompt`` plus ``few_shot``).
    """

    model_config = _STRICT

    few_shot: list[FewShotExample] = Field(default_factory=list, max_length=MAX_FEW_SHOT)
    models: dict[str, PromptVariant] = Field(default_factory=dict)
    providers: dict[str, PromptVariant] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_size(self) -> PromptRegistry:
        n = len(self.models) + len(self.providers)
        if n > MAX_PROMPT_VARIANTS:
            raise ValueError(f"{n} prompt variants; at most {MAX_PROMPT_VARIANTS} per role")
        return self

    @property
    def has_variants(self) -> bool:
        return bool(self.models or self.providers)


class SummarizeSettings(BaseModel):
    """Summarize the context triage would drop, on the cheapest healthy route, first."""

    model_config = _STRICT

    enabled: bool = False
    budget_ms: float = Field(default=DEFAULT_SUMMARIZE_BUDGET_MS, gt=0.0, le=120_000.0)
    max_tokens: int = Field(default=DEFAULT_SUMMARIZE_MAX_TOKENS, ge=16, le=4_096)


class ShadowSettings(BaseModel):
    """Shadow evaluation of a role: re-run a sample of its calls on a reference route.

    A sampled call's answer is compared with the reference route's answer to the same
    request (``scorer``; default ``json`` for roles with an output schema, else
    ``normalized``). The rolling agreement per route is kept in the health store; a route
    whose mean agreement over ``window_s`` (at least ``min_samples``) drops more than
    ``tolerance`` below 1 is marked ``QUALITY_REGRESSION`` and demoted like an SLA breach,
    and restored with the same hysteresis (``restore_after`` agreeing samples in a row, or
    the drop back under ``hysteresis_margin x tolerance``).
    """

    model_config = _STRICT

    reference_route: str = Field(min_length=1)
    sample_fraction: float = Field(default=DEFAULT_SHADOW_SAMPLE_FRACTION, ge=0.0, le=1.0)
    tolerance: float = Field(default=DEFAULT_SHADOW_TOLERANCE, gt=0.0, le=1.0)
    window_s: float = Field(default=DEFAULT_SHADOW_WINDOW_S, gt=0.0, le=86_400.0)
    min_samples: int = Field(default=DEFAULT_SHADOW_MIN_SAMPLES, ge=1, le=MAX_QUALITY_SAMPLES)
    restore_after: int = Field(default=DEFAULT_SHADOW_RESTORE_AFTER, ge=1, le=MAX_SLA_STREAK)
    timeout_s: float = Field(default=DEFAULT_SHADOW_TIMEOUT_S, gt=0.0, le=600.0)
    scorer: ScorerSpec | None = None

    @model_validator(mode="after")
    def _judge_named(self) -> ShadowSettings:
        if self.scorer is not None and self.scorer.kind == "judge" and not self.scorer.judge_route:
            raise ValueError("scorer.kind 'judge' needs scorer.judge_route (an endpoint)")
        return self


class RerunSettings(BaseModel):
    """Degraded re-run of a role's pipeline steps once its primary is back.

    A step answered degraded (tier 2, cache or static) is re-run on the role's tier 0 when
    the primary is restored within ``window_s`` (checked every ``check_interval_s``); an
    agreeing re-run (``scorer`` agreement >= ``min_agreement``) is recorded as the step's
    revised result, a disagreeing one raises an escalation.
    """

    model_config = _STRICT

    enabled: bool = True
    window_s: float = Field(default=DEFAULT_RERUN_WINDOW_S, gt=0.0, le=86_400.0)
    check_interval_s: float = Field(default=DEFAULT_RERUN_CHECK_INTERVAL_S, ge=1.0, le=3600.0)
    min_agreement: float = Field(default=DEFAULT_RERUN_MIN_AGREEMENT, ge=0.0, le=1.0)
    scorer: ScorerSpec | None = None

    @model_validator(mode="after")
    def _local_scorer(self) -> RerunSettings:
        # The re-run is graded in workflow code, which cannot call a judge model.
        if self.scorer is not None and self.scorer.kind == "judge":
            raise ValueError(
                "scorer.kind 'judge' is not supported for degraded re-runs; "
                "use exact, normalized or json"
            )
        return self


class RolePolicy(BaseModel):
    """Everything the planner needs about one agent role."""

    model_config = _STRICT

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    sla: LatencySLA = Field(default_factory=LatencySLA)
    ttft_budget_ms: float = Field(default=DEFAULT_TTFT_BUDGET_MS, gt=0.0)
    total_budget_ms: float = Field(default=DEFAULT_TOTAL_BUDGET_MS, gt=0.0)
    attempt_timeout_ms: float | None = Field(default=None, gt=0.0)
    idle_budget_ms: float | None = Field(default=None, gt=0.0)
    hedging: HedgeSettings = Field(default_factory=HedgeSettings)
    critical: bool = False
    stateless: bool = True
    output_schema: dict[str, Any] | None = None
    min_quality: float = Field(default=0.0, ge=0.0, le=1.0)
    min_confidence: float = Field(
        default=DEFAULT_MIN_CONFIDENCE,
        ge=0.0,
        le=1.0,
        description="a critical role answering below this confidence escalates",
    )
    max_reply_bytes: int = Field(
        default=DEFAULT_MAX_REPLY_BYTES,
        ge=MIN_REPLY_BYTES,
        le=MAX_REPLY_BYTES_LIMIT,
        description="a longer reply fails as oversized_output and fails over",
    )
    roster: Roster
    system_prompt: str | None = None
    prompts: PromptRegistry = Field(default_factory=PromptRegistry)
    summarize: SummarizeSettings = Field(default_factory=SummarizeSettings)
    content_filter: ContentFilterMode = Field(
        default=ContentFilterMode.REFUSE,
        description="a content refusal is returned (refuse) or shopped to another model",
    )
    bulkhead: str = Field(
        default=DEFAULT_BULKHEAD,
        pattern=r"^[a-z0-9][a-z0-9_-]*$",
        description="task queue / slot pool this role's model calls run in",
    )
    shadow: ShadowSettings | None = None
    rerun: RerunSettings | None = None
    qualification: RoleQualification | None = Field(
        default=None,
        description="the role's entry of qualification.lock_file, attached by the loader",
    )

    @model_validator(mode="after")
    def _check_budgets(self) -> RolePolicy:
        if self.ttft_budget_ms > self.total_budget_ms:
            raise ValueError(
                f"ttft_budget_ms ({self.ttft_budget_ms}) must be <= "
                f"total_budget_ms ({self.total_budget_ms})"
            )
        if self.attempt_timeout_ms is not None and self.attempt_timeout_ms > self.total_budget_ms:
            raise ValueError(
                f"attempt_timeout_ms ({self.attempt_timeout_ms}) must be <= "
                f"total_budget_ms ({self.total_budget_ms})"
            )
        if self.output_schema is not None:
            try:
                jsonschema.Draft202012Validator.check_schema(self.output_schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(
                    f"output_schema is not a valid JSON Schema: {exc.message}"
                ) from exc
        return self

    @property
    def attempt_timeout(self) -> float:
        """Per-attempt timeout in ms: ``attempt_timeout_ms`` or, unset, the whole budget."""
        return self.attempt_timeout_ms or self.total_budget_ms

    @property
    def idle_budget(self) -> float:
        """Longest gap between stream chunks in ms: ``idle_budget_ms`` or the TTFT budget."""
        return self.idle_budget_ms or self.ttft_budget_ms


class ScoringWeights(BaseModel):
    """How the planner ranks routes within a tier; the weights sum to 1."""

    model_config = _STRICT

    health: float = Field(default=DEFAULT_WEIGHT_HEALTH, ge=0.0, le=1.0)
    latency: float = Field(default=DEFAULT_WEIGHT_LATENCY, ge=0.0, le=1.0)
    cost: float = Field(default=DEFAULT_WEIGHT_COST, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_sum(self) -> ScoringWeights:
        total = self.health + self.latency + self.cost
        if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
            raise ValueError(f"weights must sum to 1 (health + latency + cost = {total:g})")
        return self


class ProbeSettings(BaseModel):
    """The active health check: a tiny completion sent to every endpoint on an interval."""

    model_config = _STRICT

    interval_s: float = Field(
        default=DEFAULT_PROBE_INTERVAL_S, ge=MIN_PROBE_INTERVAL_S, le=MAX_PROBE_INTERVAL_S
    )
    timeout_s: float = Field(default=DEFAULT_PROBE_TIMEOUT_S, gt=0.0, le=600.0)
    max_tokens: int = Field(default=DEFAULT_PROBE_MAX_TOKENS, ge=1, le=256)
    half_open_interval_s: float | None = Field(
        default=None,
        ge=MIN_PROBE_INTERVAL_S,
        le=MAX_PROBE_INTERVAL_S,
        description="probe cadence while a route is half-open; None: interval_s / 4",
    )

    def half_open_interval(self) -> float:
        """How often a half-open route is probed until it closes (faster than interval_s)."""
        if self.half_open_interval_s is not None:
            return self.half_open_interval_s
        return max(MIN_PROBE_INTERVAL_S, self.interval_s / HALF_OPEN_PROBE_SPEEDUP)


class RateLimitSettings(BaseModel):
    """What a 429 does: wait briefly on the same route, or cool it down and fail over."""

    model_config = _STRICT

    max_wait_ms: float = Field(default=DEFAULT_RATE_LIMIT_MAX_WAIT_MS, ge=0.0, le=60_000.0)
    default_cooldown_s: float = Field(default=DEFAULT_RATE_LIMIT_COOLDOWN_S, gt=0.0, le=3600.0)


class RateBudget(BaseModel):
    """Requests- and tokens-per-minute budget of one endpoint or one bulkhead.

    Shared by every worker through the health store (a token bucket per unit holding one
    minute of the rate, see :mod:`resilience.budget`). ``reserve`` is the share of each
    bucket that only ``critical`` roles may use, so ordinary and failover traffic cannot
    exhaust the quota a critical role needs.
    """

    model_config = _STRICT

    requests_per_minute: int | None = Field(default=None, ge=1, le=10_000_000)
    tokens_per_minute: int | None = Field(default=None, ge=1, le=10_000_000_000)
    reserve: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="share of the budget kept for critical roles"
    )

    @model_validator(mode="after")
    def _some_limit(self) -> RateBudget:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError("set requests_per_minute, tokens_per_minute or both")
        return self


class RateBudgets(BaseModel):
    """Rate budgets per endpoint (its provider quota) and per bulkhead (its share)."""

    model_config = _STRICT

    endpoints: dict[str, RateBudget] = Field(default_factory=dict)
    bulkheads: dict[str, RateBudget] = Field(default_factory=dict)

    def limited(self) -> bool:
        return bool(self.endpoints or self.bulkheads)


class QualificationSettings(BaseModel):
    """Where the qualification lock lives and which route judges free-text answers."""

    model_config = _STRICT

    lock_file: str | None = Field(
        default=None,
        description="lock file written by `failover qualify`, relative to the policy file",
    )
    judge_route: str | None = Field(
        default=None, description="endpoint that grades free-text answers (scorer kind judge)"
    )


class PolicyConfig(BaseModel):
    """The whole failover policy. Cross-references are checked on construction.

    ``warnings`` is filled by validation (never read from YAML): it lists standbys that
    share both organisation and region with a primary, which a provider or regional
    outage would take down together.
    """

    model_config = ConfigDict(extra="forbid", frozen=False)

    version: int = Field(default=DEFAULT_POLICY_VERSION, ge=1, le=1)
    endpoints: dict[str, EndpointConfig] = Field(min_length=1)
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    breaker_overrides: dict[str, BreakerOverride] = Field(default_factory=dict)
    probes: ProbeSettings = Field(default_factory=ProbeSettings)
    rate_limit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    rate_budgets: RateBudgets = Field(default_factory=RateBudgets)
    hysteresis_margin: float = Field(default=DEFAULT_HYSTERESIS_MARGIN, gt=0.0, lt=1.0)
    scoring: ScoringWeights = Field(default_factory=ScoringWeights)
    qualification: QualificationSettings = Field(default_factory=QualificationSettings)
    roles: dict[str, RolePolicy] = Field(min_length=1)
    warnings: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _cross_check(self) -> PolicyConfig:
        errors = _cross_reference_errors(self)
        if errors:
            # PolicyError (not ValueError) so pydantic does not wrap it and the field
            # paths survive to the caller unchanged.
            raise PolicyError(errors)
        self.warnings = _standby_warnings(self)
        return self

    def breaker_for(self, route: str) -> BreakerSettings:
        """The breaker settings for ``route``: the defaults with its override applied."""
        override = self.breaker_overrides.get(route)
        return override.apply(self.breaker) if override else self.breaker

    def trial_settings(self, route: str, role: str | None = None) -> BreakerSettings:
        """:meth:`breaker_for` with the trial latency line resolved, never None.

        A configured ``trial_latency_ms`` wins; otherwise the line is the TTFT budget of
        ``role`` (a real-call trial) or, for a probe, the smallest TTFT budget among the
        roles whose roster holds the route, so a route closed by probes is fast enough
        for every role that uses it.
        """
        settings = self.breaker_for(route)
        if settings.trial_latency_ms is not None:
            return settings
        if role is not None and role in self.roles:
            line = self.roles[role].ttft_budget_ms
        else:
            budgets = [r.ttft_budget_ms for r in self.roles.values() if route in r.roster.routes()]
            line = min(budgets, default=DEFAULT_TTFT_BUDGET_MS)
        return settings.model_copy(update={"trial_latency_ms": line})

    def role(self, name: str) -> RolePolicy:
        """The policy of role ``name``; an :class:`UnknownNameError` names the known roles."""
        try:
            return self.roles[name]
        except KeyError:
            known = ", ".join(sorted(self.roles)) or "none"
            raise UnknownNameError([(f"roles.{name}", f"unknown role (known: {known})")]) from None

    def endpoint(self, name: str) -> EndpointConfig:
        """The endpoint called ``name``; an :class:`UnknownNameError` names the known ones."""
        try:
            return self.endpoints[name]
        except KeyError:
            known = ", ".join(sorted(self.endpoints)) or "none"
            raise UnknownNameError(
                [(f"endpoints.{name}", f"unknown endpoint (known: {known})")]
            ) from None

    def routes_for(self, role: str) -> list[str]:
        """All roster routes of ``role`` in tier order (tier0, tier1, tier2)."""
        return self.role(role).roster.routes()

    def with_qualification(self, lock: QualificationLock) -> PolicyConfig:
        """A copy with each role's lock entry attached (``RolePolicy.qualification``).

        Lock entries for roles or routes the policy does not have are ignored with a
        warning; a role the lock does not cover keeps planning every route.
        """
        warnings = list(self.warnings)
        roles = dict(self.roles)
        for name, entry in lock.roles.items():
            if name not in roles:
                warnings.append(f"qualification lock: role {name!r} is not in the policy; ignored")
                continue
            extra = sorted(set(entry.routes) - set(roles[name].roster.routes()))
            if extra:
                warnings.append(
                    f"qualification lock: role {name!r} has verdicts for routes not in its "
                    f"roster ({', '.join(extra)}); ignored"
                )
            roles[name] = roles[name].model_copy(update={"qualification": entry})
        return self.model_copy(update={"roles": roles, "warnings": warnings})

    def subset_for(self, role: str, extra_routes: list[str] | None = None) -> PolicyConfig:
        """The policy cut down to one role and the endpoints it may use (for history).

        Keeps the role's roster routes plus ``extra_routes`` (a per-call roster override),
        and only the breaker overrides of those endpoints, so the subset is itself a valid
        policy. Unknown names raise :class:`UnknownNameError`.
        """
        policy_role = self.role(role)
        quality = [route for _, route in quality_routes(policy_role)]
        names = list(dict.fromkeys([*policy_role.roster.routes(), *(extra_routes or []), *quality]))
        endpoints = {r: self.endpoint(r) for r in names}
        return self.model_copy(
            update={
                "endpoints": endpoints,
                "roles": {role: policy_role},
                "breaker_overrides": {
                    r: o for r, o in self.breaker_overrides.items() if r in endpoints
                },
                "rate_budgets": RateBudgets(
                    endpoints={
                        r: b for r, b in self.rate_budgets.endpoints.items() if r in endpoints
                    },
                    bulkheads={
                        n: b
                        for n, b in self.rate_budgets.bulkheads.items()
                        if n == policy_role.bulkhead
                    },
                ),
                # Workflows need the role's verdicts (on the role), not where the lock
                # lives or which route judges; the judge may not be in the subset.
                "qualification": QualificationSettings(),
            }
        )

    def checked_subset_for(self, role: str, extra_routes: list[str] | None = None) -> PolicyConfig:
        """:meth:`subset_for`, validated the way a workflow will decode it.

        The subset travels to the workflow as JSON and is validated again there, where a
        failure cannot be reported (the workflow task would retry forever). Validating
        the round trip here turns any such problem into a :class:`PolicyError` whose
        paths name the role, for the role-context activity and ``config check`` alike.
        """
        subset = self.subset_for(role, extra_routes)
        try:
            return PolicyConfig.model_validate_json(subset.model_dump_json())
        except PolicyError as exc:
            raise PolicyError(_subset_paths(role, exc.errors)) from None
        except ValidationError as exc:
            raise PolicyError(_subset_paths(role, _validation_errors(exc))) from None


def _subset_paths(role: str, errors: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(f"roles.{role} (policy sent to workflows): {path}", msg) for path, msg in errors]


def load_time_errors(cfg: PolicyConfig) -> list[tuple[str, str]]:
    """Checks made when a policy is loaded (``config check``, worker start), not on every
    construction.

    A policy also travels inside running workflows' history and is validated again
    whenever a workflow decodes it; a rule added later must not make those old copies
    undecodable (the workflow task would fail forever), so newer rules live here:

    * every role's subset is built exactly as the role-context activity builds it, so
      ``config check``, worker start-up and the running workflow accept the same policies;
    * no static fallback approves (it answers when nothing could review).
    """
    errors: list[tuple[str, str]] = []
    for name, role in cfg.roles.items():
        errors.extend(_approving_static(role.roster.static, f"roles.{name}.roster.static"))
        try:
            cfg.checked_subset_for(name)
        except PolicyError as exc:
            errors.extend(exc.errors)
    return errors


def _cross_reference_errors(cfg: PolicyConfig) -> list[tuple[str, str]]:
    errors: list[tuple[str, str]] = []
    for key, ep in cfg.endpoints.items():
        if ep.name != key:
            errors.append((f"endpoints.{key}.name", f"name {ep.name!r} differs from its key"))
    for route, override in cfg.breaker_overrides.items():
        path = f"breaker_overrides.{route}"
        if route not in cfg.endpoints:
            errors.append((path, f"unknown endpoint {route!r}"))
            continue
        try:
            override.apply(cfg.breaker)
        except ValidationError as exc:
            errors.extend(_validation_errors(exc, prefix=path))
    for route in cfg.rate_budgets.endpoints:
        if route not in cfg.endpoints:
            errors.append((f"rate_budgets.endpoints.{route}", f"unknown endpoint {route!r}"))
    bulkheads = {r.bulkhead for r in cfg.roles.values()}
    for name in cfg.rate_budgets.bulkheads:
        if name not in bulkheads:
            known = ", ".join(sorted(bulkheads))
            errors.append(
                (f"rate_budgets.bulkheads.{name}", f"no role runs in bulkhead {name!r} ({known})")
            )
    judge = cfg.qualification.judge_route
    if judge is not None and judge not in cfg.endpoints:
        errors.append(("qualification.judge_route", f"unknown endpoint {judge!r}"))
    for key, role in cfg.roles.items():
        base = f"roles.{key}"
        if role.name != key:
            errors.append((f"{base}.name", f"name {role.name!r} differs from its key"))
        for tier, routes in role.roster.tiers():
            for i, route in enumerate(routes):
                if route not in cfg.endpoints:
                    errors.append((f"{base}.roster.tier{tier}[{i}]", f"unknown endpoint {route!r}"))
        errors.extend(_static_fallback_errors(role, f"{base}.roster.static"))
        for field, route in quality_routes(role):
            if route not in cfg.endpoints:
                errors.append((f"{base}.{field}", f"unknown endpoint {route!r}"))
        errors.extend(_prompt_key_errors(cfg, role, f"{base}.prompts"))
    return errors


def _prompt_key_errors(cfg: PolicyConfig, role: RolePolicy, path: str) -> list[tuple[str, str]]:
    """A prompt variant keyed to a model or provider none of the role's routes serve is a
    typo: it would never be selected, silently."""
    eps = [cfg.endpoints[r] for r in role.roster.routes() if r in cfg.endpoints]
    models = {m for ep in eps for m in (ep.model, ep.family)}
    providers = {p for ep in eps for p in (ep.provider_name, ep.provider.value) if p}
    errors = [
        (f"{path}.models.{k}", f"no route of the role serves this model (known: {sorted(models)})")
        for k in role.prompts.models
        if k not in models
    ]
    errors += [
        (
            f"{path}.providers.{k}",
            f"no route of the role is at this provider (known: {sorted(providers)})",
        )
        for k in role.prompts.providers
        if k not in providers
    ]
    return errors


def quality_routes(role: RolePolicy) -> list[tuple[str, str]]:
    """(field path, route) of every endpoint the role's shadow and re-run settings name."""
    out: list[tuple[str, str]] = []
    if role.shadow is not None:
        out.append(("shadow.reference_route", role.shadow.reference_route))
    for name, settings in (("shadow", role.shadow), ("rerun", role.rerun)):
        if settings is not None and settings.scorer is not None and settings.scorer.judge_route:
            out.append((f"{name}.scorer.judge_route", settings.scorer.judge_route))
    return out


def role_scorer(role: RolePolicy, spec: ScorerSpec | None) -> ScorerSpec:
    """The scorer comparing two answers of ``role``: ``spec``, else ``json`` for a role with
    an output schema (its fields compared), else ``normalized`` text."""
    if spec is not None:
        return spec
    if role.output_schema is not None:
        return ScorerSpec(kind="json", json_schema=role.output_schema)
    return ScorerSpec(kind="normalized")


def _static_fallback_errors(role: RolePolicy, path: str) -> list[tuple[str, str]]:
    """The static fallback must be something downstream agents can consume as-is."""
    static = role.roster.static
    if role.output_schema is None:
        return []
    if static.data is None:
        return [(f"{path}.data", "required because the role has an output_schema")]
    validator = jsonschema.Draft202012Validator(role.output_schema)
    problems = []
    for err in sorted(validator.iter_errors(static.data), key=lambda e: list(e.absolute_path)):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        problems.append((f"{path}.data{where}", f"violates output_schema: {err.message}"))
    return problems


def _approving_static(static: StaticFallback, path: str) -> list[tuple[str, str]]:
    """A static fallback that approves: served when no model could review, it would pass
    unreviewed work as reviewed (a confident wrong answer)."""
    candidates: list[tuple[str, Any]] = [(f"{path}.data", static.data)]
    try:
        candidates.append((f"{path}.content", json.loads(static.content)))
    except ValueError:
        pass
    problems = []
    for where, value in candidates:
        verdict = value.get("verdict") if isinstance(value, dict) else None
        if isinstance(verdict, str) and verdict.strip().lower() in APPROVING_VERDICTS:
            problems.append(
                (
                    f"{where}.verdict" if where.endswith(".data") else where,
                    f"a static fallback must never approve (verdict {verdict!r}): it is "
                    "served when no model could review; use a non-approving verdict such "
                    "as 'revise' (the pipeline reports the review as unreviewed)",
                )
            )
    return problems


def _standby_warnings(cfg: PolicyConfig) -> list[str]:
    warnings = []
    for key, role in cfg.roles.items():
        primaries = [cfg.endpoints[r] for r in role.roster.tier0]
        for i, route in enumerate(role.roster.tier1):
            standby = cfg.endpoints[route]
            for primary in primaries:
                if (standby.organisation, standby.region) == (primary.organisation, primary.region):
                    warnings.append(
                        f"roles.{key}.roster.tier1[{i}]: standby {route!r} shares organisation "
                        f"{standby.organisation!r} and region {standby.region!r} with tier0 "
                        f"{primary.name!r}; one outage would take both down"
                    )
    return warnings


def _format_loc(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _validation_errors(exc: ValidationError, *, prefix: str = "") -> list[tuple[str, str]]:
    out = []
    for err in exc.errors(include_url=False):
        # Drop pydantic's union/function tags (e.g. 'function-after[...]') from the path.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        path = _format_loc(loc)
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        msg = err["msg"].removeprefix("Value error, ")
        out.append((path or "<policy>", msg))
    return out


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _interpolate(
    value: Any, env: Mapping[str, str], path: str, errors: list[tuple[str, str]]
) -> Any:
    """Expand ``${VAR}`` / ``${VAR:-default}`` in every string, recording unset variables."""
    if isinstance(value, str):

        def _sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in env and env[name] != "":
                return env[name]
            if default is not None:
                return default
            errors.append((path or "<policy>", f"environment variable {name!r} is not set"))
            return m.group(0)

        return _VAR.sub(_sub, value)
    if isinstance(value, dict):
        return {
            k: _interpolate(v, env, f"{path}.{k}" if path else str(k), errors)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_interpolate(v, env, f"{path}[{i}]", errors) for i, v in enumerate(value)]
    return value


def _inject_names(data: dict[str, Any], section: str, errors: list[tuple[str, str]]) -> None:
    """YAML maps name -> fields; the models carry the name, so copy the key in."""
    entries = data.get(section)
    if not isinstance(entries, dict):
        return
    for key, fields in entries.items():
        if isinstance(fields, dict):
            fields.setdefault("name", key)
        elif fields is not None:
            errors.append((f"{section}.{key}", "must be a mapping"))


def parse_policy(data: Any, *, env: Mapping[str, str] | None = None) -> PolicyConfig:
    """Validate a policy already parsed from YAML/JSON; raise :class:`PolicyError`.

    Strings are interpolated from ``env`` (default ``os.environ``) first; every problem
    found (interpolation, types, ranges, cross-references, schemas) is reported at once.
    """
    env = os.environ if env is None else env
    if not isinstance(data, dict):
        raise PolicyError([("<policy>", "the policy must be a mapping at the top level")])
    errors: list[tuple[str, str]] = []
    data = _interpolate(data, env, "", errors)
    if "warnings" in data:
        errors.append(("warnings", "is computed by validation and cannot be set"))
    roles = data.get("roles")
    for key, role in roles.items() if isinstance(roles, dict) else ():
        if isinstance(role, dict) and "qualification" in role:
            errors.append(
                (
                    f"roles.{key}.qualification",
                    "is read from the lock file named by qualification.lock_file "
                    "(written by `failover qualify`) and cannot be set here",
                )
            )
    _inject_names(data, "endpoints", errors)
    _inject_names(data, "roles", errors)
    if errors:
        raise PolicyError(errors)
    # pydantic's lax mode would read `true` as 1 and `false` as 0 for a number.
    bools = _bool_as_number_errors(data, PolicyConfig, "")
    try:
        cfg = PolicyConfig.model_validate(data)
    except ValidationError as exc:
        # Field errors stop pydantic before the cross-reference check runs; repeat the
        # name checks on the raw data so one run reports every problem.
        # A boolean's own error says it better than the range check of its 0 or 1.
        seen = {path for path, _ in bools}
        errors = bools + [e for e in _validation_errors(exc) if e[0] not in seen]
        errors += _raw_reference_errors(data)
        raise PolicyError(list(dict.fromkeys(errors))) from None
    except PolicyError as exc:
        raise PolicyError(bools + exc.errors) from None
    if bools:
        raise PolicyError(bools)
    errors = load_time_errors(cfg)
    if errors:
        raise PolicyError(errors)
    return cfg


def _numeric_only(annotation: Any) -> bool:
    """The annotation takes numbers (int/float, maybe None) but never a bool."""
    args = typing.get_args(annotation) or (annotation,)
    types = {a for a in args if a is not type(None)}
    return bool(types) and bool not in types and types <= {int, float}


def _bool_as_number_errors(value: Any, model: Any, path: str) -> list[tuple[str, str]]:
    """Every YAML boolean sitting where the schema wants a number, with its field path."""
    if not (isinstance(value, dict) and isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    out: list[tuple[str, str]] = []
    for key, item in value.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue
        where = f"{path}.{key}" if path else str(key)
        ann = field.annotation
        if isinstance(item, bool) and _numeric_only(ann):
            out.append((where, f"expected a number, got a boolean ({str(item).lower()})"))
            continue
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        if origin is dict and len(args) == 2 and isinstance(item, dict):
            for k, v in item.items():
                out += _bool_as_number_errors(v, args[1], f"{where}.{k}")
        else:
            sub = next((a for a in (args or (ann,)) if isinstance(a, type)), None)
            out += _bool_as_number_errors(item, sub, where)
    return out


def _raw_reference_errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    """Unknown endpoint names in rosters and overrides, read defensively from raw data."""
    endpoints = data.get("endpoints")
    known = set(endpoints) if isinstance(endpoints, dict) else set()
    errors: list[tuple[str, str]] = []
    overrides = data.get("breaker_overrides")
    for route in overrides if isinstance(overrides, dict) else ():
        if route not in known:
            errors.append((f"breaker_overrides.{route}", f"unknown endpoint {route!r}"))
    roles = data.get("roles")
    for key, role in roles.items() if isinstance(roles, dict) else ():
        roster = role.get("roster") if isinstance(role, dict) else None
        if not isinstance(roster, dict):
            continue
        for tier in (0, 1, 2):
            routes = roster.get(f"tier{tier}")
            for i, route in enumerate(routes if isinstance(routes, list) else ()):
                if isinstance(route, str) and route not in known:
                    errors.append(
                        (f"roles.{key}.roster.tier{tier}[{i}]", f"unknown endpoint {route!r}")
                    )
    return errors


# --- `failover config check` -------------------------------------------------------------


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
    out = [r for r in role.roster.routes() if unqualified_reason(r, role.min_quality, q)]
    left = f"never planned: {', '.join(out)}" if out else "every measured route qualifies"
    return (
        f"qualified {q.qualified_at} on {q.golden_set} ({q.golden_hash}), min_quality "
        f"{threshold(role.min_quality, q):.2f}: {left}"
    )
