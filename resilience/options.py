"""Per-call options for ``resilient_complete`` and how they reshape a role's policy (pure).

A caller may override, for one call, the total deadline, the roster (which routes sit in
which live tier), what happens when every live tier fails (degrade to the cached/static
answer, or raise ``FailoverExhausted`` with the attempts) and whether a content-filter
refusal may be shopped to another model, and how old a role context taken earlier in the
run may be for the call to plan from it. :func:`apply_call_options` turns (role policy,
options) into the effective role policy the planner sees; it validates route names
against the policy so a typo fails the call at once with the known names.
"""

# No ``from __future__ import annotations`` here: pydantic would compile every field's
# annotation string when the module loads, and workflow files import these types
# (bench/import_cost.py). Forward references are quoted instead.
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_failover.resilience.content_filter import ContentFilterMode

if TYPE_CHECKING:  # the policy's model graph: not loaded by a workflow file importing this
    from agent_failover.resilience.config import PolicyConfig, RolePolicy


class OnExhausted(StrEnum):
    """What a call does when every live tier has failed."""

    #: Serve the cached answer, else the role's static fallback (flagged as degraded).
    DEGRADE = "degrade"
    #: Raise ``FailoverExhausted`` carrying every attempt; the caller decides.
    RAISE = "raise"


class RosterOverride(BaseModel):
    """Live tiers for one call; every name must be an endpoint of the policy."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    tier0: list[str] = Field(min_length=1)
    tier1: list[str] = Field(default_factory=list)
    tier2: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> "RosterOverride":
        routes = self.routes()
        if len(set(routes)) != len(routes):
            raise ValueError("a route appears more than once in the roster override")
        return self

    def routes(self) -> list[str]:
        return [*self.tier0, *self.tier1, *self.tier2]


class CallOptions(BaseModel):
    """Per-call overrides of the role's policy; ``None`` keeps the policy's value."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    deadline_ms: float | None = Field(
        default=None, gt=0.0, description="total deadline of the call (replaces total_budget_ms)"
    )
    roster: RosterOverride | None = None
    on_exhausted: OnExhausted = OnExhausted.DEGRADE
    content_filter: ContentFilterMode | None = None
    context_reuse_s: float | None = Field(
        default=None,
        ge=0.0,
        description="how old (seconds of workflow time) a role context taken earlier in "
        "the run may be for this call to plan from it (replaces the role's "
        "context_reuse_s; 0: read a fresh one)",
    )


def override_routes(options: CallOptions | None) -> list[str] | None:
    """The routes an override names (the worker must load their endpoints), or None."""
    return options.roster.routes() if options and options.roster else None


def apply_call_options(
    role: "RolePolicy", policy: "PolicyConfig", options: CallOptions | None
) -> "RolePolicy":
    """The role as this call sees it; :class:`UnknownNameError` for an unknown route."""
    if options is None:
        return role
    update: dict[str, object] = {}
    if options.roster is not None:
        unknown = [r for r in options.roster.routes() if r not in policy.endpoints]
        if unknown:
            from agent_failover.resilience.config import UnknownNameError

            known = ", ".join(sorted(policy.endpoints))
            raise UnknownNameError(
                [("options.roster", f"unknown endpoint(s) {unknown} (known: {known})")]
            )
        r = options.roster
        update["roster"] = role.roster.model_copy(
            update={"tier0": list(r.tier0), "tier1": list(r.tier1), "tier2": list(r.tier2)}
        )
    if options.deadline_ms is not None:
        d = options.deadline_ms
        update["total_budget_ms"] = d
        update["ttft_budget_ms"] = min(role.ttft_budget_ms, d)
        if role.attempt_timeout_ms is not None:
            update["attempt_timeout_ms"] = min(role.attempt_timeout_ms, d)
    if options.content_filter is not None:
        update["content_filter"] = options.content_filter
    return role.model_copy(update=update) if update else role
