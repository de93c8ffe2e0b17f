"""Shadow evaluation and degraded re-runs: the pure decisions (no IO, no clock reads).

Shadow evaluation re-runs a sample of a role's calls on a reference route and grades how
well the answering route agreed with it (1 = same answer). The decisions here:

* :func:`sample_ticket` / :func:`is_sampled`: which calls are shadowed. The ticket is a
  hash of (workflow id, role, the call's sequence number in the run), so a replay, a
  retry of the workflow task and a test all draw the same calls, and the share of calls
  sampled converges on ``shadow.sample_fraction``.
* :func:`evaluate_quality`: whether a route's rolling agreement has dropped far enough
  below 1 to mark it ``QUALITY_REGRESSION``, with the SLA demotion's hysteresis
  (:mod:`resilience.sla`): the *delta* is ``1 - mean agreement`` over ``shadow.window_s``
  (at least ``min_samples``); it demotes above ``tolerance``; a demoted route is restored
  by ``restore_after`` agreeing samples in a row (each at least ``1 - margin x tolerance``)
  or by the delta falling below ``margin x tolerance``; in between the verdict holds.
  Samples older than the last verdict change never count against the new verdict, so a
  restored route is not re-demoted by the samples that demoted it.

Degraded re-runs: :func:`primary_restored` says whether a role's tier 0 is back (a route
closed, not latency- or quality-demoted, not cooling down), and :func:`rerun_verdict`
whether a re-run's answer agrees with the degraded one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from agent_failover.resilience.config import RolePolicy, ShadowSettings
from agent_failover.resilience.contracts import AgentOutput, BreakerState, HealthSnapshot

#: Hash bytes turned into a ticket (8 bytes: 2**64 distinct tickets).
_TICKET_BYTES = 8


class QualitySample(BaseModel):
    """One shadow comparison of a route's answer with the reference route's."""

    model_config = ConfigDict(frozen=True)

    at: float
    score: float = Field(ge=0.0, le=1.0)

    def encode(self) -> str:
        """``at|score``, the store's compact form."""
        return f"{self.at!r}|{self.score!r}"

    @classmethod
    def decode(cls, raw: str) -> QualitySample:
        """The inverse of :meth:`encode`."""
        at, _, score = raw.partition("|")
        return cls(at=float(at), score=float(score))


class QualityState(BaseModel):
    """What the health store holds about one route's quality for one role."""

    samples: list[QualitySample] = Field(default_factory=list, description="oldest first")
    regressed: bool = False
    since: float | None = Field(default=None, description="when the verdict last changed")
    delta: float | None = None


class QualityVerdict(BaseModel):
    """Whether the route is quality-regressed, why, and the numbers the decision used."""

    model_config = ConfigDict(frozen=True)

    regressed: bool
    reason: str
    delta: float | None = None
    samples: int = 0


def sample_ticket(workflow_id: str, role: str, seq: int) -> float:
    """A uniform draw in ``[0, 1)`` fixed by the workflow id, role and call number."""
    digest = hashlib.sha256(f"{workflow_id}\x1f{role}\x1f{seq}".encode()).digest()
    return int.from_bytes(digest[:_TICKET_BYTES], "big") / float(1 << (8 * _TICKET_BYTES))


def is_sampled(ticket: float, fraction: float) -> bool:
    """The call is shadowed when its ticket falls under the sample fraction."""
    return ticket < fraction


def shadow_targets(
    answered_by: str, reference: str, regressed: Sequence[str], roster: Sequence[str]
) -> list[str]:
    """Routes a shadow run compares with the reference: the one that answered, plus every
    quality-regressed roster route (they get no traffic while demoted; this is how they
    earn their restoration). Never the reference itself."""
    out = [answered_by] if answered_by in roster else []
    out += [r for r in roster if r in regressed]
    return [r for r in dict.fromkeys(out) if r != reference]


def evaluate_quality(
    state: QualityState, settings: ShadowSettings, margin: float, *, now: float
) -> QualityVerdict:
    """Demote on a sustained drop, restore on a good streak or below ``margin`` (module doc)."""
    if not 0.0 < margin <= 1.0:
        raise ValueError(f"hysteresis margin must be within (0, 1], got {margin}")
    lo = now - settings.window_s
    since = state.since
    fresh = [s for s in state.samples if lo < s.at <= now and (since is None or s.at > since)]
    good_line = 1.0 - margin * settings.tolerance
    if state.regressed:
        streak = 0
        for s in reversed(fresh):
            if s.score < good_line:
                break
            streak += 1
        if streak >= settings.restore_after:
            why = f"restored: last {streak} shadow samples agreed (>= {good_line:.2f})"
            return QualityVerdict(regressed=False, reason=why, samples=len(fresh))
    if len(fresh) < settings.min_samples:
        why = f"{len(fresh)} shadow samples < min_samples {settings.min_samples}; verdict kept"
        return QualityVerdict(regressed=state.regressed, reason=why, samples=len(fresh))
    delta = 1.0 - sum(s.score for s in fresh) / len(fresh)
    n = len(fresh)
    if delta > settings.tolerance:
        why = f"agreement with the reference down {delta:.2f} > tolerance {settings.tolerance:.2f}"
        return QualityVerdict(regressed=True, reason=why, delta=delta, samples=n)
    if not state.regressed:
        return QualityVerdict(regressed=False, reason="within tolerance", delta=delta, samples=n)
    line = margin * settings.tolerance
    if delta < line:
        why = f"restored: drop {delta:.2f} < {line:.2f} ({margin:.0%} of the tolerance)"
        return QualityVerdict(regressed=False, reason=why, delta=delta, samples=n)
    why = f"still regressed: drop {delta:.2f} not yet below {line:.2f}"
    return QualityVerdict(regressed=True, reason=why, delta=delta, samples=n)


def primary_restored(role: RolePolicy, snapshot: HealthSnapshot, now: float) -> str | None:
    """The first tier-0 route that can serve again, or None while none can: its breaker
    closed, not demoted for latency or quality, not cooling down, and its newest
    observation (a call or a probe) a success, so a primary that just failed the step is
    not "restored" merely because its breaker has not tripped."""
    for route in role.roster.tier0:
        h = snapshot.get(route)
        if h.breaker not in (BreakerState.CLOSED, BreakerState.FORCED_CLOSED):
            continue
        if h.sla_demoted or h.quality_regressed or (h.cooldown_until or 0.0) > now:
            continue
        if h.recent and not h.recent[-1].ok:
            continue
        return route
    return None


class RerunStatus(StrEnum):
    """What became of a degraded step's re-run."""

    #: The primary answered and agreed: its answer is the step's revised result.
    REVISED = "revised"
    #: The primary answered and disagreed materially: an escalation was raised.
    ESCALATED = "escalated"
    #: The primary was not restored within the window: the degraded answer stands.
    EXPIRED = "expired"
    #: The re-run itself did not get a full answer: the degraded answer stands.
    FAILED = "failed"


class StepRevision(BaseModel):
    """What the degraded re-run of one pipeline step found (the ``revisions`` query)."""

    step: str
    role: str
    status: RerunStatus
    original_tier: int
    original_capability: str
    agreement: float | None = Field(default=None, description="scorer agreement, 0..1")
    detail: str = ""
    revised: AgentOutput | None = Field(
        default=None, description="the primary's answer (revised), or a human's (escalated)"
    )
    decision: str | None = Field(default=None, description="the escalation's decision")
    at: float | None = Field(default=None, description="workflow time it was decided")


def rerun_verdict(agreement: float, min_agreement: float) -> RerunStatus:
    """Agreeing enough is a revision; less is a material disagreement to escalate."""
    return RerunStatus.REVISED if agreement >= min_agreement else RerunStatus.ESCALATED
