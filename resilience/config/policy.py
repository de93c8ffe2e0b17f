"""The root of the failover policy: :class:`PolicyConfig` and the invariants across sections.

A policy names the endpoints (routes), the breaker and probe settings shared by all
routes (with per-endpoint overrides), the 429 handling and rate budgets, the scoring
weights (:class:`ScoringWeights`), the qualification lock and, per agent role, its
:class:`~.roles.RolePolicy`. Each section validates itself; :class:`PolicyConfig` then
checks the cross-references on construction (every roster, override, budget and quality
setting names a known endpoint or bulkhead, each prompt variant a model or provider the
role's routes serve) and records the standby diversity warnings. Its methods resolve a
route's breaker settings and cut the policy down to the subset one workflow carries.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_failover.resilience.config.breaker import (
    BreakerOverride,
    BreakerSettings,
    ProbeSettings,
)
from agent_failover.resilience.config.budgets import RateBudgets, RateLimitSettings
from agent_failover.resilience.config.cost import CostEfficiencySettings
from agent_failover.resilience.config.evaluation import QualificationSettings
from agent_failover.resilience.config.gates import role_fingerprint
from agent_failover.resilience.config.roles import (
    DEFAULT_TTFT_BUDGET_MS,
    RolePolicy,
    quality_routes,
    static_fallback_errors,
)
from agent_failover.resilience.config.validation import (
    STRICT,
    PolicyError,
    UnknownNameError,
    validation_errors,
)
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.qualification import QualificationLock, stale_reasons

DEFAULT_POLICY_VERSION = 1
DEFAULT_HYSTERESIS_MARGIN = 0.8
DEFAULT_WEIGHT_HEALTH = 0.5
DEFAULT_WEIGHT_LATENCY = 0.3
DEFAULT_WEIGHT_COST = 0.2
WEIGHT_SUM_TOLERANCE = 1e-6


class ScoringWeights(BaseModel):
    """How the planner ranks routes within a tier; the weights sum to 1."""

    model_config = STRICT

    health: float = Field(
        default=DEFAULT_WEIGHT_HEALTH,
        ge=0.0,
        le=1.0,
        description="Weight of the health component, 1 - min(1, error rate + semantic "
        "failure rate), which is 1 before any call. The three weights sum to 1.",
    )
    latency: float = Field(
        default=DEFAULT_WEIGHT_LATENCY,
        ge=0.0,
        le=1.0,
        description="Weight of the latency component, max(0, 1 - p95 / the role's SLA p95), "
        "which is 0.5 before any sample.",
    )
    cost: float = Field(
        default=DEFAULT_WEIGHT_COST,
        ge=0.0,
        le=1.0,
        description="Weight of the cost component: this request's price min-max scaled over "
        "the role's roster, cheapest 1, dearest 0.",
    )

    @model_validator(mode="after")
    def _check_sum(self) -> ScoringWeights:
        total = self.health + self.latency + self.cost
        if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
            raise ValueError(f"weights must sum to 1 (health + latency + cost = {total:g})")
        return self


class PolicyConfig(BaseModel):
    """The whole failover policy. Cross-references are checked on construction.

    ``warnings`` is filled by validation (never read from YAML): it lists standbys that
    share both organisation and region with a primary, which a provider or regional
    outage would take down together.
    """

    model_config = ConfigDict(extra="forbid", frozen=False)

    version: int = Field(
        default=DEFAULT_POLICY_VERSION, ge=1, le=1, description="Schema version of the file."
    )
    endpoints: dict[str, EndpointConfig] = Field(
        min_length=1,
        description="Map of route name to endpoint, at least one; the key is the route's name.",
    )
    breaker: BreakerSettings = Field(
        default_factory=BreakerSettings,
        description="Circuit-breaker settings shared by every route.",
    )
    breaker_overrides: dict[str, BreakerOverride] = Field(
        default_factory=dict,
        description="Per-route partial `breaker` settings merged over `breaker`, keyed by "
        "endpoint name; the merged result is validated again.",
    )
    probes: ProbeSettings = Field(
        default_factory=ProbeSettings,
        description="Active health checks run by the health monitor workflow.",
    )
    rate_limit: RateLimitSettings = Field(
        default_factory=RateLimitSettings,
        description="What a 429 does to the call and to the route.",
    )
    rate_budgets: RateBudgets = Field(
        default_factory=RateBudgets,
        description="Requests- and tokens-per-minute budgets per endpoint and per bulkhead, "
        "shared by every worker. Empty: no budgets.",
    )
    hysteresis_margin: float = Field(
        default=DEFAULT_HYSTERESIS_MARGIN,
        gt=0.0,
        lt=1.0,
        description="A route demoted for breaching its SLA is restored only below this "
        "fraction of its thresholds: `sla.restore_after` observations in a row each under "
        "margin x p95, or window p95 and p99 under margin x theirs. Between margin x "
        "threshold and the threshold the previous verdict holds, so a route does not flap.",
    )
    cost_efficiency: CostEfficiencySettings = Field(
        default_factory=CostEfficiencySettings,
        description="Tokens per dollar of each route against its own 7-day baseline: "
        "tracked always, and when enabled a route under `min_share` (default 0.5) of its "
        "baseline is demoted like an SLA breach.",
    )
    scoring: ScoringWeights = Field(
        default_factory=ScoringWeights,
        description="Weights of the route score that orders routes inside a tier; tier "
        "order always wins.",
    )
    qualification: QualificationSettings = Field(
        default_factory=QualificationSettings,
        description="Where the qualification lock lives and which route judges free-text answers.",
    )
    roles: dict[str, RolePolicy] = Field(
        min_length=1,
        description="Map of role name to role policy, at least one; the key is the role's name.",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="Computed, not configured: each tier-1 standby that shares both "
        "organisation and region with a tier-0 route of its role (one outage would take "
        "both down).",
    )

    @model_validator(mode="after")
    def _cross_check(self) -> PolicyConfig:
        errors = _cross_reference_errors(self)
        if errors:
            # PolicyError (not ValueError) so pydantic does not wrap it and the field
            # paths survive to the caller unchanged.
            raise PolicyError(errors)
        self.warnings = [*_standby_warnings(self), *_hedge_warnings(self)]
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

    def with_qualification(
        self, lock: QualificationLock, golden_now: dict[str, str | None] | None = None
    ) -> PolicyConfig:
        """A copy with each role's lock entry attached (``RolePolicy.qualification``).

        Lock entries for roles or routes the policy does not have are ignored with a
        warning; a role the lock does not cover keeps planning every route. Each entry's
        ``stale`` says what changed since it was measured: the role's prompt, schema or
        tools, and the golden set when ``golden_now`` has its current hash.
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
            now = (golden_now or {}).get(name)
            stale = [*stale_reasons(entry, role_fingerprint(roles[name]), now), *entry.stale]
            entry = entry.model_copy(update={"stale": list(dict.fromkeys(stale))})
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
            raise PolicyError(_subset_paths(role, validation_errors(exc))) from None


def _subset_paths(role: str, errors: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(f"roles.{role} (policy sent to workflows): {path}", msg) for path, msg in errors]


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
            errors.extend(validation_errors(exc, prefix=path))
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
        errors.extend(static_fallback_errors(role, f"{base}.roster.static"))
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


def _hedge_warnings(cfg: PolicyConfig) -> list[str]:
    """Hedging asked for on a role that is not stateless: the planner never hedges it (two
    concurrent runs of a call with side effects could apply them twice), so say so."""
    return [
        f"roles.{key}.hedging: enabled on a role that is not stateless; hedging is off for "
        "it (set `stateless: true` if its calls have no side effects, or disable hedging)"
        for key, role in cfg.roles.items()
        if role.hedging.enabled and not role.stateless
    ]


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
