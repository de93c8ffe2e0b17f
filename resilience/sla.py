"""Latency SLA evaluation with hysteresis: demote a slow route early, restore it late.

A route whose rolling p95 or p99 exceeds its role's SLA is demoted (moved behind the
healthy routes) before any call to it times out: proactive substitution. Restoring it
as soon as the percentile dips back under the threshold would make a route hovering
around the line flap between first and last place, so a demoted route is restored only
when both percentiles fall below ``margin x threshold`` (e.g. 80%). Between the two
lines the previous verdict holds. Without enough samples there is no evidence either
way and the previous verdict holds too.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from agent_failover.resilience.config import LatencySLA
from agent_failover.resilience.contracts import WindowStats


class SlaVerdict(BaseModel):
    """Whether the route is demoted, why, and the percentiles the decision used."""

    model_config = ConfigDict(frozen=True)

    demoted: bool
    reason: str | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None


def _samples(stats: WindowStats) -> int:
    # Stats built before ``latency_samples`` existed only know ``calls``.
    return stats.latency_samples or stats.calls


def evaluate_sla(
    prev_demoted: bool, stats: WindowStats, sla: LatencySLA, margin: float
) -> SlaVerdict:
    """Demote on a breach, restore only below ``margin`` x both thresholds, else keep ``prev``."""
    if not 0.0 < margin <= 1.0:
        raise ValueError(f"hysteresis margin must be within (0, 1], got {margin}")
    p95, p99 = stats.p95_ms, stats.p99_ms
    if _samples(stats) < sla.min_samples or p95 is None or p99 is None:
        why = f"{_samples(stats)} latency samples < min_samples {sla.min_samples}; verdict kept"
        return SlaVerdict(demoted=prev_demoted, reason=why, p95_ms=p95, p99_ms=p99)
    if p95 > sla.p95_ms:
        why = f"p95 {p95:.0f} ms > SLA {sla.p95_ms:.0f} ms"
        return SlaVerdict(demoted=True, reason=why, p95_ms=p95, p99_ms=p99)
    if p99 > sla.p99_ms:
        why = f"p99 {p99:.0f} ms > SLA {sla.p99_ms:.0f} ms"
        return SlaVerdict(demoted=True, reason=why, p95_ms=p95, p99_ms=p99)
    if not prev_demoted:
        return SlaVerdict(demoted=False, reason=None, p95_ms=p95, p99_ms=p99)
    lo95, lo99 = margin * sla.p95_ms, margin * sla.p99_ms
    if p95 < lo95 and p99 < lo99:
        why = f"restored: p95 {p95:.0f} ms < {lo95:.0f} ms and p99 {p99:.0f} ms < {lo99:.0f} ms"
        return SlaVerdict(demoted=False, reason=why, p95_ms=p95, p99_ms=p99)
    why = (
        f"still demoted: p95 {p95:.0f} ms / p99 {p99:.0f} ms not yet below "
        f"{margin:.0%} of the SLA ({lo95:.0f} / {lo99:.0f} ms)"
    )
    return SlaVerdict(demoted=True, reason=why, p95_ms=p95, p99_ms=p99)
