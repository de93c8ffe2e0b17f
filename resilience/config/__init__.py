"""The failover policy as validated pydantic models (pure: parsing and checks, no IO).

Each module holds one part of the policy with its ``DEFAULT_*`` constants beside the
fields they seed: :mod:`.breaker` (circuit breaker and probes), :mod:`.sla`,
:mod:`.roster` and :mod:`.roles` (a role's latency objective, tiers, cache and static
fallback, budgets and hedging), :mod:`.prompts` (few-shot examples, prompt variants,
summarization), :mod:`.budgets` (429 handling and rate budgets), :mod:`.evaluation`
(shadow evaluation, degraded re-runs, qualification), :mod:`.validation` (the errors and
shared helpers), :mod:`.policy` (the root :class:`PolicyConfig` and its cross-reference
checks), :mod:`.parse` (:func:`parse_policy`) and :mod:`.describe` (the ``config check``
summary). Every model forbids unknown keys and validates on construction, so a bad
``policy.yaml`` fails at start-up with a :class:`PolicyError` listing each problem with its
field path (``roles.critic.roster.tier1[0]: unknown endpoint 'gpt-x'``); every field
carries the description the policy reference is generated from. This package re-exports
the names callers import; reading a file is ``agent_failover.config.loader``.
"""

from agent_failover.resilience.config.breaker import (
    DEFAULT_ERROR_RATE_THRESHOLD,
    DEFAULT_MAX_OPEN_DURATION_S,
    DEFAULT_OPEN_DURATION_S,
    DEFAULT_PROBE_INTERVAL_S,
    BreakerOverride,
    BreakerSettings,
    ProbeSettings,
)
from agent_failover.resilience.config.budgets import RateBudget, RateBudgets, RateLimitSettings
from agent_failover.resilience.config.cost import CostEfficiencySettings
from agent_failover.resilience.config.describe import describe_policy
from agent_failover.resilience.config.evaluation import (
    MAX_QUALITY_SAMPLES,
    QualificationSettings,
    RerunSettings,
    ShadowSettings,
)
from agent_failover.resilience.config.parse import load_time_errors, parse_policy
from agent_failover.resilience.config.policy import (
    DEFAULT_HYSTERESIS_MARGIN,
    PolicyConfig,
    ScoringWeights,
)
from agent_failover.resilience.config.prompts import (
    FewShotExample,
    PromptRegistry,
    PromptVariant,
    SummarizeSettings,
)
from agent_failover.resilience.config.roles import (
    DEFAULT_MAX_REPLY_BYTES,
    ContentFilterMode,
    HedgeSettings,
    RolePolicy,
    quality_routes,
    role_scorer,
)
from agent_failover.resilience.config.roster import (
    DEFAULT_CACHE_MAX_STALENESS_S,
    CacheTier,
    Roster,
    StaticFallback,
)
from agent_failover.resilience.config.sla import MAX_SLA_STREAK, LatencySLA
from agent_failover.resilience.config.validation import PolicyError, UnknownNameError
from agent_failover.resilience.endpoint import EndpointConfig

__all__ = [
    "DEFAULT_CACHE_MAX_STALENESS_S",
    "DEFAULT_ERROR_RATE_THRESHOLD",
    "DEFAULT_HYSTERESIS_MARGIN",
    "DEFAULT_MAX_OPEN_DURATION_S",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_OPEN_DURATION_S",
    "DEFAULT_PROBE_INTERVAL_S",
    "MAX_QUALITY_SAMPLES",
    "MAX_SLA_STREAK",
    "BreakerOverride",
    "BreakerSettings",
    "CacheTier",
    "ContentFilterMode",
    "CostEfficiencySettings",
    "EndpointConfig",
    "FewShotExample",
    "HedgeSettings",
    "LatencySLA",
    "PolicyConfig",
    "PolicyError",
    "ProbeSettings",
    "PromptRegistry",
    "PromptVariant",
    "QualificationSettings",
    "RateBudget",
    "RateBudgets",
    "RateLimitSettings",
    "RerunSettings",
    "RolePolicy",
    "Roster",
    "ScoringWeights",
    "ShadowSettings",
    "StaticFallback",
    "SummarizeSettings",
    "UnknownNameError",
    "describe_policy",
    "load_time_errors",
    "parse_policy",
    "quality_routes",
    "role_scorer",
]
