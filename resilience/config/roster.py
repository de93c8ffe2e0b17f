"""A role's roster: its live routes by tier, then the cache tier and the static fallback.

:class:`Roster` lists endpoint names in tiers 0 (primaries), 1 (hot standbys) and 2 (warm
fallbacks), each route at most once; after them come the degraded tiers that always
answer: :class:`CacheTier` (a previous good answer to the same request) and
:class:`StaticFallback` (fixed text and, for structured roles, schema-valid data). A
static fallback must never approve, because it answers when nothing could review:
:func:`approving_static_errors` is that load-time rule.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, model_validator

from agent_failover.resilience.config.validation import STRICT

DEFAULT_CACHE_TTL_S = 3_600.0
DEFAULT_CACHE_MAX_STALENESS_S = 86_400.0
#: Verdicts a static fallback may never carry: it answers when nothing could review.
APPROVING_VERDICTS = frozenset({"approve", "approved", "accept", "accepted", "pass", "lgtm"})


class CacheTier(BaseModel):
    """The degraded tier that serves a previous good answer for the same request."""

    model_config = STRICT

    enabled: bool = Field(
        default=True,
        description="After every live tier failed, serve a previous good answer to the same "
        "normalized request (tier 3, reason `CACHED_RESPONSE`).",
    )
    ttl_s: float = Field(
        default=DEFAULT_CACHE_TTL_S,
        gt=0.0,
        description="Seconds a stored answer counts as fresh; older ones are stale but still "
        "served (after every live route failed) until `max_staleness_s`.",
    )
    max_staleness_s: float = Field(
        default=DEFAULT_CACHE_MAX_STALENESS_S,
        gt=0.0,
        description="Age in seconds of the oldest answer the degraded path may still serve, "
        "at least `ttl_s`; the cache keeps each answer this long, and its confidence decays "
        "from 0.6 to 0.3 across it.",
    )

    @model_validator(mode="after")
    def _check_staleness(self) -> CacheTier:
        if self.max_staleness_s < self.ttl_s:
            raise ValueError(
                f"max_staleness_s ({self.max_staleness_s}) must be >= ttl_s ({self.ttl_s})"
            )
        return self


class StaticFallback(BaseModel):
    """The last answer: fixed text and, for structured roles, data valid for the schema."""

    model_config = STRICT

    content: str = Field(
        min_length=1,
        description="The last-resort answer text (tier 3, reason `STATIC_FALLBACK`, "
        "confidence 0.2).",
    )
    data: dict[str, Any] | list[Any] | None = Field(
        default=None,
        description="Structured form of the static answer, required and validated when the "
        "role has an `output_schema`. A `verdict` that approves (`approve`, `accept`, "
        "`pass`, `lgtm`, ...), here or in JSON `content`, is rejected when the policy loads.",
    )


class Roster(BaseModel):
    """A role's routes by tier, then its cache tier and static fallback (tier 3)."""

    model_config = STRICT

    tier0: list[str] = Field(
        min_length=1, description="Primary routes: at least one endpoint name."
    )
    tier1: list[str] = Field(
        default_factory=list,
        description="Hot standbys (endpoint names), on a different organisation or region "
        "than tier 0, else the policy loads with a warning. Their outputs carry "
        "`STANDBY_ROUTE`.",
    )
    tier2: list[str] = Field(
        default_factory=list,
        description="Warm fallbacks (endpoint names): cheaper or smaller models, or a "
        "large-context one. Their outputs carry `SMALLER_MODEL` and are degraded.",
    )
    cache: CacheTier = Field(
        default_factory=CacheTier,
        description="The cache tier, tried after every live tier failed.",
    )
    static: StaticFallback = Field(
        description="The static fallback that closes every plan and always answers."
    )

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


def approving_static_errors(static: StaticFallback, path: str) -> list[tuple[str, str]]:
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
