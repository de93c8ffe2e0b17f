"""Latency SLA evaluation with hysteresis: demote a slow route early, restore it late.

A route whose rolling p95 or p99 exceeds its role's SLA is demoted (moved behind the
healthy routes) before any call to it times out: proactive substitution. Restoring it
as soon as the percentile dips back under the threshold would make a route hovering
around the line flap between first and last place, so a demoted route is restored only
on evidence that it is well inside the line:

* ``sla.restore_after`` consecutive observations (probes or calls) since the demotion,
  each successful and faster than ``margin x p95``. A demoted route gets almost no real
  traffic (it is planned last), so this is how it comes back: the health monitor probes
  it every interval and it is restored within ``interval x (restore_after + 1)`` of
  recovering, whatever ``min_samples`` says; or
* both window percentiles below ``margin x`` their thresholds, with ``min_samples``.

Between the lines the previous verdict holds; without enough samples too. A restored
route's window still holds the slow samples that demoted it, so for one SLA window after
a verdict change (``since``) the percentiles are not trusted against it: only
``restore_after`` consecutive observations above the SLA demote it again. That dwell is
what keeps restoration from flapping.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from agent_failover.resilience.config import LatencySLA
from agent_failover.resilience.contracts import RecentSample, WindowStats


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


def trailing_streak(
    recent: Sequence[RecentSample], since: float | None, good: Callable[[RecentSample], bool]
) -> int:
    """How many of the newest observations after ``since`` satisfy ``good``, in a row."""
    n = 0
    for s in reversed(recent):
        if (since is not None and s.at <= since) or not good(s):
            break
        n += 1
    return n


def evaluate_sla(
    prev_demoted: bool,
    stats: WindowStats,
    sla: LatencySLA,
    margin: float,
    *,
    recent: Sequence[RecentSample] = (),
    since: float | None = None,
    now: float | None = None,
) -> SlaVerdict:
    """Demote on a breach, restore on a good streak or below ``margin`` (see the module doc).

    ``recent`` are the route's newest observations (oldest first), ``since`` when the
    verdict last changed and ``now`` the evaluation time; without them only the window
    percentiles decide, as before streaks existed.
    """
    if not 0.0 < margin <= 1.0:
        raise ValueError(f"hysteresis margin must be within (0, 1], got {margin}")
    p95, p99 = stats.p95_ms, stats.p99_ms
    line = margin * sla.p95_ms
    if prev_demoted:
        good = trailing_streak(recent, since, lambda s: s.ok and s.latency_ms < line)
        if good >= sla.restore_after:
            why = f"restored: last {good} observations ok and under {line:.0f} ms"
            return SlaVerdict(demoted=False, reason=why, p95_ms=p95, p99_ms=p99)
    elif since is not None and now is not None and now - since < sla.window_s:
        bad = trailing_streak(recent, since, lambda s: s.latency_ms > sla.p95_ms)
        if bad >= sla.restore_after:
            why = f"demoted again: last {bad} observations over the SLA p95 {sla.p95_ms:.0f} ms"
            return SlaVerdict(demoted=True, reason=why, p95_ms=p95, p99_ms=p99)
        why = f"restored {now - since:.0f} s ago: window percentiles not trusted for one window"
        return SlaVerdict(demoted=False, reason=why, p95_ms=p95, p99_ms=p99)
    return _by_percentiles(prev_demoted, stats, sla, margin)


def _by_percentiles(
    prev_demoted: bool, stats: WindowStats, sla: LatencySLA, margin: float
) -> SlaVerdict:
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
