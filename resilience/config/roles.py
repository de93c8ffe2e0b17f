"""One agent role's policy: its budgets, hedging, roster, prompts and quality settings.

:class:`RolePolicy` is everything the planner needs about a role: the latency SLA, the
time budgets (first token, attempt, whole call, stream idle gap), whether it may be hedged
(:class:`HedgeSettings`, stateless roles only), its tiered :class:`~.roster.Roster`, its
prompt registry, what a content-filter refusal does (:class:`ContentFilterMode`), its
bulkhead and its optional shadow evaluation and degraded re-runs. The helpers below read
one role: the routes its quality settings name, the scorer comparing its answers, and
whether its static fallback fits its output schema.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from agent_failover.resilience.config.evaluation import (
    QualityGates,
    RerunSettings,
    ShadowSettings,
)
from agent_failover.resilience.config.prompts import PromptRegistry, SummarizeSettings
from agent_failover.resilience.config.roster import Roster
from agent_failover.resilience.config.sla import LatencySLA
from agent_failover.resilience.config.validation import STRICT
from agent_failover.resilience.content_filter import ContentFilterMode
from agent_failover.resilience.limits import MAX_REPLY_BYTES_LIMIT
from agent_failover.resilience.models import ToolSpec
from agent_failover.resilience.qualification import RoleQualification
from agent_failover.resilience.quality import ScorerSpec

DEFAULT_TTFT_BUDGET_MS = 5_000.0
DEFAULT_TOTAL_BUDGET_MS = 60_000.0
DEFAULT_HEDGE_MAX_HEDGES = 1
DEFAULT_HEDGE_MIN_DELAY_MS = 50.0
#: Largest reply a role accepts; bigger ones fail as ``oversized_output`` and fail over.
DEFAULT_MAX_REPLY_BYTES = 256 * 1024
MIN_REPLY_BYTES = 1024
#: Confidence below which a critical role's answer escalates (0: only static and cached ones).
DEFAULT_MIN_CONFIDENCE = 0.0
#: Bulkhead (own task queue and activity slots) of roles that do not name one.
DEFAULT_BULKHEAD = "core"
#: Seconds a role context (policy and route health) taken by a call may serve the same
#: role's next calls in one workflow run (0: every call reads its own).
DEFAULT_CONTEXT_REUSE_S = 1.0
MAX_CONTEXT_REUSE_S = 60.0


class HedgeSettings(BaseModel):
    """Whether a stateless role starts the next route before the current one answers.

    The delay is ``delay_ms`` when set, else the primary's measured TTFT p95, clamped to
    ``[min_delay_ms, max_delay_ms]`` (``max_delay_ms`` None = the role's TTFT budget).
    """

    model_config = STRICT

    enabled: bool = Field(
        default=False,
        description="Start the next route before the current one has answered, keep the "
        "first good answer and cancel the other. Only for `stateless` roles.",
    )
    delay_ms: float | None = Field(
        default=None,
        gt=0.0,
        description="Milliseconds after the attempt it hedges that a hedge starts. Null: the "
        "primary's measured TTFT p95 (half the TTFT budget while there are no samples), "
        "clamped to `min_delay_ms` .. `max_delay_ms`.",
    )
    max_hedges: int = Field(
        default=DEFAULT_HEDGE_MAX_HEDGES,
        ge=0,
        le=4,
        description="How many attempts after the first may be hedges.",
    )
    min_delay_ms: float = Field(
        default=DEFAULT_HEDGE_MIN_DELAY_MS,
        ge=0.0,
        description="Lower clamp on the hedge delay, in milliseconds.",
    )
    max_delay_ms: float | None = Field(
        default=None,
        gt=0.0,
        description="Upper clamp on the hedge delay in milliseconds, at least "
        "`min_delay_ms`. Null: the role's `ttft_budget_ms`.",
    )

    @model_validator(mode="after")
    def _check_clamp(self) -> HedgeSettings:
        if self.max_delay_ms is not None and self.max_delay_ms < self.min_delay_ms:
            raise ValueError(
                f"max_delay_ms ({self.max_delay_ms}) must be >= min_delay_ms ({self.min_delay_ms})"
            )
        return self


class RolePolicy(BaseModel):
    """Everything the planner needs about one agent role."""

    model_config = STRICT

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        description="The role's name, filled in from its key in `roles` by the loader; if "
        "written, it must equal the key.",
    )
    sla: LatencySLA = Field(
        default_factory=LatencySLA,
        description="The role's latency objective; a route breaching it is demoted.",
    )
    ttft_budget_ms: float = Field(
        default=DEFAULT_TTFT_BUDGET_MS,
        gt=0.0,
        description="Milliseconds to first token allowed per attempt, at most "
        "`total_budget_ms`; also the smallest budget worth starting an attempt with.",
    )
    total_budget_ms: float = Field(
        default=DEFAULT_TOTAL_BUDGET_MS,
        gt=0.0,
        description="Milliseconds one agent call may take across all its attempts. The plan "
        "never starts an attempt at or past it, even if every earlier attempt uses its full "
        "timeout.",
    )
    attempt_timeout_ms: float | None = Field(
        default=None,
        gt=0.0,
        description="Timeout of one attempt in milliseconds, at most `total_budget_ms`; the "
        "effective value is the smaller of this and the budget left at the attempt's start. "
        "Null: `total_budget_ms`.",
    )
    idle_budget_ms: float | None = Field(
        default=None,
        gt=0.0,
        description="Longest gap in milliseconds between two stream chunks before the stream "
        "counts as stalled. Null: `ttft_budget_ms`.",
    )
    live_tier_floor_ms: float | None = Field(
        default=None,
        ge=0.0,
        description="Milliseconds of the one attempt each live tier (0, 1, 2) with a callable "
        "route still gets once the budget is spent, before the cache and the static "
        "fallback: time lost to a killed worker or a slow first tier never skips a "
        "healthy standby. At most `total_budget_ms`. Null: the smaller of `ttft_budget_ms` "
        "and the attempt timeout; 0: off (the budget is a hard limit).",
    )
    context_reuse_s: float = Field(
        default=DEFAULT_CONTEXT_REUSE_S,
        ge=0.0,
        le=MAX_CONTEXT_REUSE_S,
        description="Seconds (workflow time) a role context (the role's policy and its "
        "routes' health snapshot, one local activity) taken by one call is reused by the "
        "role's next calls in the same workflow run, instead of reading it again. A failed "
        "attempt drops the contexts naming its route. 0: every call reads its own. "
        "`CallOptions.context_reuse_s` overrides it per call.",
    )
    hedging: HedgeSettings = Field(
        default_factory=HedgeSettings,
        description="Whether and when the role starts a second route before the first answers.",
    )
    critical: bool = Field(
        default=False,
        description="A critical role that ends degraded can trigger human escalation, and "
        "may use the reserve of a rate budget.",
    )
    stateless: bool = Field(
        default=True,
        description="The call has no side effects, so it may be hedged (run twice).",
    )
    output_schema: dict[str, Any] | None = Field(
        default=None,
        description="JSON Schema (2020-12) the reply must be valid JSON for, else the answer "
        "is a semantic failure; the static fallback's `data` must validate against it too.",
    )
    min_quality: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Quality (mean golden-set score) a route needs to be planned for this "
        "role, checked against the qualification lock; the threshold the lock was written "
        "with applies too and the higher wins. Routes the lock does not mention, and every "
        "route without a lock, are planned.",
    )
    min_confidence: float = Field(
        default=DEFAULT_MIN_CONFIDENCE,
        ge=0.0,
        le=1.0,
        description="For a `critical` role, an answer whose confidence is below this "
        "escalates to a human like a static one. 0: only the static fallback and an answer "
        "from the response cache (every model tier down) escalate; those always do.",
    )
    max_reply_bytes: int = Field(
        default=DEFAULT_MAX_REPLY_BYTES,
        ge=MIN_REPLY_BYTES,
        le=MAX_REPLY_BYTES_LIMIT,
        description="Largest reply in bytes (UTF-8 text plus tool-call arguments) the role "
        "accepts; a bigger one fails as `oversized_output` and the call fails over, which "
        "keeps a model call's result under Temporal's payload limit.",
    )
    roster: Roster = Field(
        description="The role's routes by tier, then its cache tier and static fallback."
    )
    system_prompt: str | None = Field(
        default=None,
        description="System prompt added to the role's requests that carry none: the "
        "default prompt of the prompt registry.",
    )
    prompts: PromptRegistry = Field(
        default_factory=PromptRegistry,
        description="The role's default few-shot block and its per-model and per-provider "
        "prompt variants.",
    )
    summarize: SummarizeSettings = Field(
        default_factory=SummarizeSettings,
        description="Whether context triage would drop is summarized first, and how.",
    )
    content_filter: ContentFilterMode = Field(
        default=ContentFilterMode.REFUSE,
        description="What a content-filter refusal does: `refuse` returns it as a typed "
        "refusal and tries no other route; `failover` tries another model (the same model "
        "in another region is skipped). `CallOptions.content_filter` overrides it per call.",
    )
    bulkhead: str = Field(
        default=DEFAULT_BULKHEAD,
        pattern=r"^[a-z0-9][a-z0-9_-]*$",
        description="Bulkhead the role's model calls run in: its own activity slots (task "
        "queue `<queue>-llm-<bulkhead>`), so a failing tier cannot starve another.",
    )
    shadow: ShadowSettings | None = Field(
        default=None,
        description="Shadow evaluation of the role's answers on a reference route. Null: off.",
    )
    rerun: RerunSettings | None = Field(
        default=None,
        description="Re-runs of the role's degraded pipeline steps once its primary is back. "
        "Null: off.",
    )
    tools: list[ToolSpec] = Field(
        default_factory=list,
        description="Tool specs the role's calls offer the model. `failover qualify` sends "
        "them with every golden item, and the lock records their hash, so a changed tool "
        "marks the role's qualification stale. Requests still carry their own `tools`.",
    )
    quality_gates: QualityGates = Field(
        default_factory=QualityGates,
        description="What a route's golden-set run must show to be planned: score relative "
        "to the primary, schema compliance, median latency, a fresh lock.",
    )
    qualification: RoleQualification | None = Field(
        default=None,
        description="Not configurable: the role's entry of `qualification.lock_file`, "
        "attached by the loader; writing it in the policy is an error.",
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
        if self.live_tier_floor_ms is not None and self.live_tier_floor_ms > self.total_budget_ms:
            raise ValueError(
                f"live_tier_floor_ms ({self.live_tier_floor_ms}) must be <= "
                f"total_budget_ms ({self.total_budget_ms})"
            )
        if self.output_schema is not None:
            import jsonschema  # only for roles with a schema: workflow imports stay light

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
    def live_tier_floor(self) -> float:
        """Budget in ms of a live tier's guaranteed attempt (0: no guarantee)."""
        if self.live_tier_floor_ms is not None:
            return self.live_tier_floor_ms
        return min(self.ttft_budget_ms, self.attempt_timeout)

    @property
    def idle_budget(self) -> float:
        """Longest gap between stream chunks in ms: ``idle_budget_ms`` or the TTFT budget."""
        return self.idle_budget_ms or self.ttft_budget_ms


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


def static_fallback_errors(role: RolePolicy, path: str) -> list[tuple[str, str]]:
    """The static fallback must be something downstream agents can consume as-is."""
    static = role.roster.static
    if role.output_schema is None:
        return []
    if static.data is None:
        return [(f"{path}.data", "required because the role has an output_schema")]
    import jsonschema

    validator = jsonschema.Draft202012Validator(role.output_schema)
    problems = []
    for err in sorted(validator.iter_errors(static.data), key=lambda e: list(e.absolute_path)):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        problems.append((f"{path}.data{where}", f"violates output_schema: {err.message}"))
    return problems
