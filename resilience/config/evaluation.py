"""How a role's answers are checked against other routes: shadow evaluation, degraded
re-runs and the qualification lock.

:class:`ShadowSettings` re-runs a sample of a role's live calls on a reference route and
demotes a route whose answers drift (``QUALITY_REGRESSION``, :mod:`resilience.shadow`);
:class:`RerunSettings` re-runs a pipeline step answered degraded once the role's primary
is back, revising or escalating it. :class:`QualificationSettings` names the lock file
``failover qualify`` writes (:mod:`resilience.qualification`) and the route that judges
free-text answers. Each comparison is graded by a :class:`~resilience.quality.ScorerSpec`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from agent_failover.resilience.config.sla import MAX_SLA_STREAK
from agent_failover.resilience.config.validation import STRICT
from agent_failover.resilience.quality import ScorerSpec

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
#: Share of the primary's golden-set score a fallback needs on the same set (seed 001: 85 %).
DEFAULT_RELATIVE_MIN_SCORE = 0.85
#: Share of a route's golden answers that must be valid for the role's output schema.
DEFAULT_MIN_SCHEMA_COMPLIANCE = 0.95


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

    model_config = STRICT

    reference_route: str = Field(
        min_length=1,
        description="Endpoint whose answers the sampled calls are compared with.",
    )
    sample_fraction: float = Field(
        default=DEFAULT_SHADOW_SAMPLE_FRACTION,
        ge=0.0,
        le=1.0,
        description="Share of the role's live answers that are re-run on the reference route.",
    )
    tolerance: float = Field(
        default=DEFAULT_SHADOW_TOLERANCE,
        gt=0.0,
        le=1.0,
        description="Largest drop of mean agreement (1 - mean) tolerated before the route is "
        "marked `QUALITY_REGRESSION` and moved behind the healthy routes.",
    )
    window_s: float = Field(
        default=DEFAULT_SHADOW_WINDOW_S,
        gt=0.0,
        le=86_400.0,
        description="Seconds of shadow samples the rolling agreement covers.",
    )
    min_samples: int = Field(
        default=DEFAULT_SHADOW_MIN_SAMPLES,
        ge=1,
        le=MAX_QUALITY_SAMPLES,
        description="Shadow samples the window needs before it can change the verdict.",
    )
    restore_after: int = Field(
        default=DEFAULT_SHADOW_RESTORE_AFTER,
        ge=1,
        le=MAX_SLA_STREAK,
        description="Agreeing samples in a row (each at least 1 - `hysteresis_margin` x "
        "`tolerance`) that restore a regressed route; the drop falling under "
        "`hysteresis_margin` x `tolerance` restores it too.",
    )
    timeout_s: float = Field(
        default=DEFAULT_SHADOW_TIMEOUT_S,
        gt=0.0,
        le=600.0,
        description="Seconds each shadow call (reference, re-asked route, judge) may take.",
    )
    scorer: ScorerSpec | None = Field(
        default=None,
        description="How agreement is graded. Null: `json` with the role's `output_schema` "
        "for structured roles, else `normalized`.",
    )

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

    model_config = STRICT

    enabled: bool = Field(
        default=True,
        description="Re-run the role's degraded pipeline steps (tier 2, cache or static) on "
        "its tier 0 once the primary is back.",
    )
    window_s: float = Field(
        default=DEFAULT_RERUN_WINDOW_S,
        gt=0.0,
        le=86_400.0,
        description="Seconds after the step within which the primary may come back for a re-run.",
    )
    check_interval_s: float = Field(
        default=DEFAULT_RERUN_CHECK_INTERVAL_S,
        ge=1.0,
        le=3600.0,
        description="Seconds between two checks of the primary by the pipeline.",
    )
    min_agreement: float = Field(
        default=DEFAULT_RERUN_MIN_AGREEMENT,
        ge=0.0,
        le=1.0,
        description="Agreement at or above which the re-run revises the step's result; "
        "below it the pipeline escalates.",
    )
    scorer: ScorerSpec | None = Field(
        default=None,
        description="How the degraded answer is compared with the primary's; kind `judge` "
        "is not allowed. Null: as for `shadow.scorer`.",
    )

    @model_validator(mode="after")
    def _local_scorer(self) -> RerunSettings:
        # The re-run is graded in workflow code, which cannot call a judge model.
        if self.scorer is not None and self.scorer.kind == "judge":
            raise ValueError(
                "scorer.kind 'judge' is not supported for degraded re-runs; "
                "use exact, normalized or json"
            )
        return self


class QualificationSettings(BaseModel):
    """Where the qualification lock lives and which route judges free-text answers."""

    model_config = STRICT

    lock_file: str | None = Field(
        default=None,
        description="Lock file written by `failover qualify`, relative to the policy file. "
        "Each role's verdicts are attached at load time and routes below the role's "
        "`min_quality` are never planned; a missing file fails start-up naming this key.",
    )
    judge_route: str | None = Field(
        default=None,
        description="Endpoint that grades free-text golden answers (scorer kind `judge`).",
    )


class QualityGates(BaseModel):
    """What a route's golden-set run must show to be planned for the role.

    Checked against the role's entry of the qualification lock (routes the lock does not
    mention are planned as before): the golden-set score relative to the primary's on the
    same set, schema compliance, the median latency against the role's SLA, and — with
    ``require_fresh`` — that the role's prompt, schema, tools and golden set are still the
    ones the lock measured.
    """

    model_config = STRICT

    relative_min_score: float = Field(
        default=DEFAULT_RELATIVE_MIN_SCORE,
        ge=0.0,
        le=1.0,
        description="A route qualifies when its golden-set score is at least this share of "
        "the primary's (the best tier-0 route the lock measured) on the same set. 0: off.",
    )
    min_schema_compliance: float = Field(
        default=DEFAULT_MIN_SCHEMA_COMPLIANCE,
        ge=0.0,
        le=1.0,
        description="For a role with an `output_schema`: the share of a route's golden answers "
        "that must be valid for it. 0: off.",
    )
    max_p50_ms: float | None = Field(
        default=None,
        gt=0.0,
        description="Largest median golden-set latency in milliseconds a route may show. "
        "Null: the role's `sla.p95_ms` (the median must be within the role's SLA).",
    )
    latency_gate: bool = Field(
        default=True,
        description="Apply the median-latency gate (`max_p50_ms`). False: latency is "
        "measured and shown, never held against a route.",
    )
    require_fresh: bool = Field(
        default=False,
        description="Treat a stale lock entry (the role's system prompt, prompt variants, "
        "output schema, tools or golden set changed since `failover qualify`) as "
        "unqualified: every route it measured is left out until the role is re-qualified. "
        "False: a stale entry still applies and `config check` / `status` report it.",
    )
