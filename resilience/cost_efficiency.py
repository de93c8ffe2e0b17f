"""A route's tokens per dollar against its own 7-day baseline, and the demotion it can cause.

What is counted. Every *billed* attempt of a real call (not a probe) adds its spend, and
an answered one also adds its tokens (input + output): tokens per dollar is **useful
tokens per dollar spent**. A failed attempt is billed when the provider returned a whole
body with usage and we rejected it afterwards (a semantic failure: empty, truncated,
invalid against the schema, a malformed tool call, oversized): its tokens were produced
and paid for, so its spend counts and its tokens do not. Attempts that failed before a
body came back (transport errors, error statuses, cut or stalled streams) carry no usage
and count nothing. So the figure is not a constant of the configured price: it falls when
a route's billed answers get rejected, and moves with the route's input/output mix.

Shape (the latency baseline's, :mod:`resilience.baseline`): the stores keep per-minute
sums (current window: the store's horizon, 10 minutes by default) and per-hour sums (the
baseline: the :data:`~resilience.baseline.HORIZON_HOURS` completed hours, the hour in
progress left out so an ongoing drop cannot drag its own baseline down). Each bucket is
three counters: ``b`` billed attempts, ``k`` useful tokens, ``n`` spend in nano-dollars
(integers, so Redis ``HINCRBY`` keeps them exact).

:func:`evaluate_cost_efficiency` is the pure verdict, with the SLA's kind of hysteresis:
demoted under ``min_share`` of the baseline, restored only at ``min_share /
hysteresis_margin`` or when the evidence aged out. ``now`` is always an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from agent_failover.resilience.aggregates import minute_buckets, minute_of
from agent_failover.resilience.baseline import HORIZON_HOURS, completed_hours, hour_of
from agent_failover.resilience.config.cost import CostEfficiencySettings
from agent_failover.resilience.contracts import CallOutcome, CostEfficiency

#: Nano-dollars per dollar: spend is counted in integers.
NANO_PER_USD = 1_000_000_000

Fields = Mapping[str, int]


def cost_fields(outcome: CallOutcome) -> dict[str, int]:
    """What ``outcome`` adds to its minute and hour (empty when nothing was billed)."""
    if outcome.probe or outcome.cost_usd <= 0.0:
        return {}
    return {
        "b": 1,
        "k": outcome.tokens if outcome.ok else 0,
        "n": round(outcome.cost_usd * NANO_PER_USD),
    }


def sum_fields(buckets: Iterable[Fields]) -> dict[str, int]:
    """Add buckets counter by counter."""
    total: dict[str, int] = {}
    for b in buckets:
        for k, n in b.items():
            total[k] = total.get(k, 0) + n
    return total


def efficiency_from(
    current: Fields,
    baseline: Fields,
    *,
    now: float,
    window_s: float,
    verdict: tuple[bool, float | None] = (False, None),
) -> CostEfficiency:
    """The :class:`CostEfficiency` of the merged current window and baseline at ``now``;
    ``verdict`` is the persisted (demoted, since)."""
    return CostEfficiency(
        current_attempts=current.get("b", 0),
        current_tokens=current.get("k", 0),
        current_spend_usd=current.get("n", 0) / NANO_PER_USD,
        baseline_attempts=baseline.get("b", 0),
        baseline_tokens=baseline.get("k", 0),
        baseline_spend_usd=baseline.get("n", 0) / NANO_PER_USD,
        window_s=window_s,
        computed_at=now,
        demoted=verdict[0],
        since=verdict[1],
    )


class CostLedger:
    """One route's per-minute and per-hour cost counters (memory store), pruned as it goes."""

    def __init__(self, horizon_s: float) -> None:
        self.horizon_s = horizon_s
        self.minutes: dict[int, dict[str, int]] = {}
        self.hours: dict[int, dict[str, int]] = {}
        self.demoted = False
        self.since: float | None = None
        #: The oldest minute and hour held (inf: none yet).
        self._oldest_held: tuple[float, float] = (float("inf"), float("inf"))

    def add(self, outcome: CallOutcome) -> None:
        """Count ``outcome`` in its minute and hour if it was billed."""
        inc = cost_fields(outcome)
        if not inc:
            return
        for table, key in (
            (self.minutes, minute_of(outcome.at)),
            (self.hours, hour_of(outcome.at)),
        ):
            bucket = table.setdefault(key, {})
            for k, n in inc.items():
                bucket[k] = bucket.get(k, 0) + n
        # Drop what the horizon left behind when the oldest bucket held is behind it (about
        # once a minute), not by a walk over every bucket on every call.
        minute, hour = minute_of(outcome.at), hour_of(outcome.at)
        oldest_minute = min(self._oldest_held[0], minute)
        if oldest_minute < minute_of(outcome.at - self.horizon_s):
            first = minute_of(outcome.at - self.horizon_s)
            self.minutes = {m: b for m, b in self.minutes.items() if m >= first}
            oldest_minute = min(self.minutes)
        oldest_hour = min(self._oldest_held[1], hour)
        if oldest_hour < hour - HORIZON_HOURS:
            self.hours = {h: b for h, b in self.hours.items() if h >= hour - HORIZON_HOURS}
            oldest_hour = min(self.hours)
        self._oldest_held = (oldest_minute, oldest_hour)

    def efficiency(self, now: float) -> CostEfficiency:
        """The route's :class:`CostEfficiency` at ``now``."""
        current = sum_fields(self.minutes.get(m, {}) for m in minute_buckets(now, self.horizon_s))
        baseline = sum_fields(self.hours.get(h, {}) for h in completed_hours(now))
        return efficiency_from(
            current, baseline, now=now, window_s=self.horizon_s, verdict=(self.demoted, self.since)
        )


class CostVerdict(BaseModel):
    """Whether the route is demoted for cost efficiency, why, and the share it read."""

    model_config = ConfigDict(frozen=True)

    demoted: bool
    reason: str | None = None
    share: float | None = None


def evaluate_cost_efficiency(
    eff: CostEfficiency | None,
    settings: CostEfficiencySettings,
    margin: float,
    *,
    now: float,
) -> CostVerdict:
    """Demote under ``min_share`` of the baseline, restore at ``min_share / margin``.

    Starts from the persisted verdict in ``eff``. Off (``enabled`` false): never demoted.
    Figures computed a whole window before ``now`` are stale: no evidence. A demoted route
    with no billed attempt in its window is restored (the evidence aged out, as a breaker
    goes half-open); otherwise, under ``min_samples`` on either side, the verdict holds.
    """
    if not 0.0 < margin <= 1.0:
        raise ValueError(f"hysteresis margin must be within (0, 1], got {margin}")
    if not settings.enabled:
        return CostVerdict(demoted=False, share=eff.share if eff else None)
    if eff is None or eff.computed_at is None or now - eff.computed_at >= eff.window_s:
        eff = CostEfficiency(demoted=eff.demoted if eff else False)
    prev, share = eff.demoted, eff.share
    if prev and eff.current_attempts == 0:
        return CostVerdict(demoted=False, reason="restored: no billed attempt in the window")
    if (
        share is None
        or eff.current_attempts < settings.min_samples
        or eff.baseline_attempts < settings.min_samples
    ):
        why = (
            f"{eff.current_attempts} billed attempts now / {eff.baseline_attempts} in the "
            f"baseline, need {settings.min_samples}; verdict kept"
        )
        return CostVerdict(demoted=prev, reason=why, share=share)
    line, back = settings.min_share, settings.min_share / margin
    if share < line:
        why = f"tokens per dollar at {share:.0%} of its baseline < {line:.0%}"
        return CostVerdict(demoted=True, reason=why, share=share)
    if prev and share < back:
        why = f"still demoted: tokens per dollar at {share:.0%} of its baseline, not yet {back:.0%}"
        return CostVerdict(demoted=True, reason=why, share=share)
    why = f"restored: tokens per dollar at {share:.0%} of its baseline" if prev else None
    return CostVerdict(demoted=False, reason=why, share=share)
