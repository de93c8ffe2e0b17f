"""A route's latency baseline over two horizons, so a gradual slowdown cannot hide.

The relative slow-call breaker calls a call slow when it takes more than
``slow_call_baseline_factor`` x the route's baseline p95. A baseline taken from the last
ten minutes moves with the route: a 30x ramp over 20 minutes drags it along and never
crosses the factor. So each route also keeps a long-horizon baseline: latency histograms
of its successful real calls in hourly buckets, and the p95 of the last
:data:`HORIZON_HOURS` *completed* hours (a rolling 7 days). The current hour is left out,
so an ongoing ramp cannot pull the baseline up while it happens. :func:`choose_baseline`
uses the slower-moving long horizon whenever it holds enough samples, else the short one
(a new route has no history yet).

Histograms are log-binned (:data:`BIN_RATIO` wide bins, about +-5 % resolution) so an
hour of traffic costs a few dozen counters, whatever its volume. Pure: the stores keep the
buckets (memory and Redis), this module bins, merges and reads them; ``now`` is always an
argument.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from agent_failover.resilience.contracts import CallOutcome

#: Width of one bucket.
BUCKET_S = 3600.0
#: Completed buckets the long horizon covers: 7 days of hours.
HORIZON_HOURS = 168
#: Ratio between the upper edges of two neighbouring latency bins.
BIN_RATIO = 1.1
#: Highest bin (1.1**220 ms is far beyond any call; larger latencies land here).
MAX_BIN = 220
_LOG_RATIO = math.log(BIN_RATIO)

Histogram = Mapping[int, int]  # latency bin -> count


class BaselineSource(StrEnum):
    LONG = "long"  # rolling 7-day p95 from hourly buckets
    SHORT = "short"  # p95 of the store's recent window (10 minutes by default)
    NONE = "none"  # not enough history: relative slow-call detection is off


class LatencyBaseline(BaseModel):
    """Both baselines of a route and the one the slow-call breaker uses."""

    model_config = ConfigDict(frozen=True)

    short_p95_ms: float | None = None
    long_p95_ms: float | None = None
    long_samples: int = 0
    used_ms: float | None = None
    source: BaselineSource = BaselineSource.NONE


def hour_of(at: float) -> int:
    """The bucket (hours since the epoch) an observation at ``at`` falls in."""
    return int(at // BUCKET_S)


def latency_bin(latency_ms: float) -> int:
    """The log bin of ``latency_ms``: the smallest ``i`` with ``BIN_RATIO**i >= latency_ms``."""
    if latency_ms <= 1.0:
        return 0
    return min(MAX_BIN, math.ceil(math.log(latency_ms) / _LOG_RATIO - 1e-9))


def bin_upper_ms(b: int) -> float:
    """Upper edge of bin ``b`` in ms (what a percentile read from the histogram reports)."""
    return BIN_RATIO**b


def feeds_baseline(outcome: CallOutcome) -> bool:
    """Successful real calls that count against the route; probes are tiny completions and
    would drag the baseline down to their latency."""
    return outcome.ok and outcome.counts_against_route and not outcome.probe


def completed_hours(now: float, horizon_hours: int = HORIZON_HOURS) -> range:
    """The bucket numbers the long horizon reads at ``now``: the last completed hours."""
    current = hour_of(now)
    return range(current - horizon_hours, current)


def merge(histograms: Iterable[Histogram]) -> dict[int, int]:
    """Sum several histograms bin by bin."""
    total: dict[int, int] = {}
    for h in histograms:
        for b, n in h.items():
            total[b] = total.get(b, 0) + n
    return total


def histogram_percentile(hist: Histogram, q: float) -> float | None:
    """Nearest-rank ``q``-th percentile of a histogram, as its bin's upper edge."""
    n = sum(hist.values())
    if n == 0:
        return None
    rank = max(1, math.ceil(q / 100.0 * n))
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen >= rank:
            return bin_upper_ms(b)
    return bin_upper_ms(max(hist))


def long_horizon_p95(
    buckets: Mapping[int, Histogram], *, now: float, min_samples: int
) -> tuple[float | None, int]:
    """p95 over the completed hours of the horizon and how many samples it rests on.

    None below ``min_samples``: a baseline from a handful of calls would call ordinary
    variance slow.
    """
    hist = merge(buckets[h] for h in completed_hours(now) if h in buckets)
    n = sum(hist.values())
    if n < min_samples:
        return None, n
    return histogram_percentile(hist, 95.0), n


def choose_baseline(
    short_p95_ms: float | None, long_p95_ms: float | None, long_samples: int = 0
) -> LatencyBaseline:
    """The slower-moving baseline: the long horizon when it exists, else the short one."""
    if long_p95_ms is not None:
        used, source = long_p95_ms, BaselineSource.LONG
    elif short_p95_ms is not None:
        used, source = short_p95_ms, BaselineSource.SHORT
    else:
        used, source = None, BaselineSource.NONE
    return LatencyBaseline(
        short_p95_ms=short_p95_ms,
        long_p95_ms=long_p95_ms,
        long_samples=long_samples,
        used_ms=used,
        source=source,
    )


class HourlyLatency:
    """Hourly latency histograms of one route, pruned to the horizon (memory store)."""

    def __init__(self) -> None:
        self.buckets: dict[int, dict[int, int]] = {}
        #: The oldest hour held (None: none): the walk below is due only when it expired.
        self._oldest_held: int | None = None

    def add(self, outcome: CallOutcome) -> None:
        """Count ``outcome`` in its hour if it feeds the baseline; drop expired hours."""
        if not feeds_baseline(outcome):
            return
        hour = hour_of(outcome.at)
        bucket = self.buckets.setdefault(hour, {})
        b = latency_bin(outcome.latency_ms)
        bucket[b] = bucket.get(b, 0) + 1
        if self._oldest_held is None or hour < self._oldest_held:
            self._oldest_held = hour
        oldest = hour - HORIZON_HOURS
        if self._oldest_held < oldest:  # about once an hour, not on every call
            for h in [h for h in self.buckets if h < oldest]:
                del self.buckets[h]
            self._oldest_held = min(self.buckets)

    def p95(self, *, now: float, min_samples: int) -> tuple[float | None, int]:
        """:func:`long_horizon_p95` of the held buckets."""
        return long_horizon_p95(self.buckets, now=now, min_samples=min_samples)
