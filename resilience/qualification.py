"""Qualification of fallback routes: golden sets, per-route verdicts, the lock file (pure).

``failover qualify`` runs a role's golden set (:class:`GoldenItem` lines of a JSONL file)
against every route of its roster; each answer becomes an :class:`ItemResult`.
:func:`summarize_route` turns one route's results into a :class:`RouteQualification`
(mean quality score, pass rate, schema compliance, median and p95 latency, qualified or
not against ``min_quality``); a role's verdicts form a :class:`RoleQualification`, and
every qualified role lives in one :class:`QualificationLock` (``roster.lock.yaml``).

The policy loader attaches a role's lock entry to :attr:`RolePolicy.qualification`;
the role's quality gates (``resilience.config.gates``) then decide which routes the planner
may plan: the absolute threshold (:func:`unqualified_reason`), the score relative to the
primary, schema compliance and median latency. The lock also records hashes of what the
role was qualified with (:func:`content_hash`); :func:`stale_reasons` says what changed since.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_failover.resilience.percentile import percentile
from agent_failover.resilience.quality import MAX_DETAIL_CHARS, ScorerSpec

LOCK_VERSION = 1
#: Default absolute quality floor when neither the CLI nor the role sets one: the gate
#: that matters is relative to the primary (``quality_gates.relative_min_score``).
DEFAULT_MIN_QUALITY = 0.0
#: The parts of a role a lock entry's ``fingerprint`` hashes (the golden set has its own).
FINGERPRINT_PARTS = ("system_prompt", "output_schema", "tools")
#: Largest golden prompt accepted (characters): the prompt travels through history.
MAX_GOLDEN_PROMPT_CHARS = 32_000
#: Largest expected answer (JSON-encoded characters).
MAX_GOLDEN_EXPECTED_CHARS = 16_000
#: Golden items in one set; larger sets are split into several files.
MAX_GOLDEN_ITEMS = 5_000
#: Characters of a route's answer kept on its item result (for the report only).
ANSWER_EXCERPT_CHARS = 160


class GoldenItem(BaseModel):
    """One golden-set line: a prompt, its expected answer, optionally its own scorer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=128)
    prompt: str = Field(min_length=1, max_length=MAX_GOLDEN_PROMPT_CHARS)
    expected: Any = None
    system: str | None = Field(default=None, max_length=MAX_GOLDEN_PROMPT_CHARS)
    scorer: ScorerSpec | None = None
    max_tokens: int = Field(default=512, ge=1, le=32_000)

    @field_validator("expected")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        if len(json.dumps(value)) > MAX_GOLDEN_EXPECTED_CHARS:
            raise ValueError(f"expected answer longer than {MAX_GOLDEN_EXPECTED_CHARS} chars")
        return value


def content_hash(value: Any) -> str:
    """Stable hash of any JSON value (keys sorted), 16 hex digits."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def golden_hash(items: Sequence[GoldenItem]) -> str:
    """Stable hash of a golden set's content (order and every field count), 16 hex digits."""
    canonical = json.dumps(
        [i.model_dump(mode="json", exclude_none=True) for i in items],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class ItemResult(BaseModel):
    """One golden item answered by one route: small, it is kept in workflow state."""

    model_config = ConfigDict(frozen=True)

    item_id: str
    route: str
    ok: bool = Field(description="the route answered (False: error, see error_class)")
    error_class: str | None = None
    latency_ms: float | None = None
    schema_ok: bool | None = Field(default=None, description="None: the role has no schema")
    score: float = Field(default=0.0, ge=0.0, le=1.0)
    passed: bool = False
    detail: str = Field(default="", max_length=MAX_DETAIL_CHARS)
    answer_excerpt: str = Field(default="", max_length=ANSWER_EXCERPT_CHARS)


class RouteQualification(BaseModel):
    """A route's verdict in the lock file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(default="", description="The model the route served when qualified.")
    quality: float = Field(
        ge=0.0,
        le=1.0,
        description="Mean item score of the route on the golden set; an error scores 0.",
    )
    pass_rate: float = Field(
        ge=0.0, le=1.0, description="Share of the golden items whose answer passed."
    )
    items: int = Field(ge=0, description="Golden items the route was asked.")
    errors: int = Field(ge=0, description="Golden items the route failed to answer.")
    schema_compliance: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Share of the items whose answer was valid for the role's output "
        "schema. Null: the role has no schema.",
    )
    latency_p50_ms: float | None = Field(
        default=None, description="Median latency of the answered items, in milliseconds."
    )
    latency_p95_ms: float | None = Field(
        default=None, description="p95 latency of the answered items, in milliseconds."
    )
    qualified: bool = Field(
        description="The route reached the quality threshold and may be planned for the role."
    )


class RoleQualification(BaseModel):
    """One role's qualification: the set it ran, the threshold, each route's verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    golden_set: str = Field(description="Name of the golden set file the role was qualified on.")
    golden_hash: str = Field(
        description="Hash of the golden set's content, so a changed set is noticed."
    )
    scorer: str = Field(description="The scorer kind that graded the answers.")
    min_quality: float = Field(
        ge=0.0,
        le=1.0,
        description="Quality threshold the lock was written with (`failover qualify "
        "--min-quality`); the higher of it and the role's `min_quality` applies.",
    )
    qualified_at: str = Field(description="UTC date and time of the run, in ISO 8601.")
    routes: dict[str, RouteQualification] = Field(
        default_factory=dict, description="Each measured route's verdict, keyed by endpoint."
    )
    golden_path: str | None = Field(
        default=None,
        description="Path of the golden set, relative to the lock file's folder when it is "
        "below it, so a changed set marks the entry stale.",
    )
    fingerprint: dict[str, str] = Field(
        default_factory=dict,
        description="Hashes of the role's system prompt (with its variants), output schema "
        "and tools when it was qualified.",
    )
    stale: list[str] = Field(
        default_factory=list,
        description="Computed when the lock is attached, never written: what changed since "
        "the role was qualified. Empty: fresh.",
    )


class QualificationLock(BaseModel):
    """The whole lock file: one entry per qualified role."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(default=LOCK_VERSION, ge=1, le=LOCK_VERSION)
    roles: dict[str, RoleQualification] = Field(default_factory=dict)

    def with_role(self, role: str, qualification: RoleQualification) -> QualificationLock:
        """A copy with ``role``'s entry replaced (other roles kept)."""
        return QualificationLock(version=self.version, roles={**self.roles, role: qualification})


def summarize_route(
    results: Iterable[ItemResult], *, model: str, min_quality: float, with_schema: bool
) -> RouteQualification:
    """One route's verdict from its item results (an unanswered item scores 0)."""
    rows = list(results)
    n = len(rows)
    answered = [r for r in rows if r.ok]
    latencies = [r.latency_ms for r in answered if r.latency_ms is not None]
    quality = sum(r.score for r in rows) / n if n else 0.0
    schema = None
    if with_schema:
        schema = sum(1 for r in rows if r.schema_ok) / n if n else 0.0
    return RouteQualification(
        model=model,
        quality=round(quality, 4),
        pass_rate=round(sum(1 for r in rows if r.passed) / n, 4) if n else 0.0,
        items=n,
        errors=n - len(answered),
        schema_compliance=None if schema is None else round(schema, 4),
        latency_p50_ms=_rounded(percentile(latencies, 50)),
        latency_p95_ms=_rounded(percentile(latencies, 95)),
        qualified=n > 0 and quality >= min_quality,
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def threshold(role_min_quality: float, qualification: RoleQualification) -> float:
    """The quality a route needs: both the role's ``min_quality`` and the threshold the
    lock was written with (``failover qualify --min-quality``), so either can tighten it."""
    return max(role_min_quality, qualification.min_quality)


def unqualified_reason(
    route: str, role_min_quality: float, qualification: RoleQualification | None
) -> str | None:
    """Why ``route`` may not be planned for the role, or None when it may."""
    if qualification is None or route not in qualification.routes:
        return None
    verdict = qualification.routes[route]
    need = threshold(role_min_quality, qualification)
    if verdict.quality >= need and verdict.items > 0:
        return None
    return (
        f"unqualified: quality {verdict.quality:.2f} < min_quality {need:.2f} on golden set "
        f"{qualification.golden_set} ({qualification.golden_hash}, {qualification.qualified_at})"
    )


def stale_reasons(
    entry: RoleQualification, fingerprint: dict[str, str], golden_now: str | None
) -> list[str]:
    """What changed since ``entry`` was measured: the role's current ``fingerprint``
    (:data:`FINGERPRINT_PARTS`) and the golden set's hash now (None: not checked)."""
    if not entry.fingerprint:
        return ["the lock records no prompt, schema or tool hashes (written by an older version)"]
    out = [
        f"{part.replace('_', ' ')} changed"
        for part in FINGERPRINT_PARTS
        if entry.fingerprint.get(part) != fingerprint.get(part)
    ]
    if golden_now is not None and golden_now != entry.golden_hash:
        out.append(f"golden set {entry.golden_set} changed ({entry.golden_hash} -> {golden_now})")
    return out
