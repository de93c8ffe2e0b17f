"""Rolling windows of call outcomes and the exact statistics the breaker and SLA read.

A :class:`RollingWindow` keeps the most recent outcomes of one route, bounded both by
count (``max_samples``) and by age (``horizon_s`` behind the newest outcome), so memory
per route is fixed: at the default 2048 samples and roughly 1 KiB per pydantic
``CallOutcome`` that is about 2 MiB per route in the worst case. :func:`compute_stats`
turns a list of outcomes into a :class:`~resilience.contracts.WindowStats` with exact
nearest-rank percentiles (sorting at most ``max_samples`` values is cheap next to an
LLM call, and exact values make the SLA decisions reproducible in tests and replays).
Nothing here reads a clock: ``now`` is always an argument.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import CallOutcome, WindowStats
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.percentile import percentile

DEFAULT_MAX_SAMPLES = 2048
DEFAULT_HORIZON_S = 600.0


class RollingWindow:
    """The recent outcomes of one route, bounded by count and by age.

    Outcomes may arrive slightly out of order (several workers report the same route);
    :meth:`outcomes` filters by timestamp, so order only affects which sample is evicted
    first when the count bound is hit.
    """

    def __init__(
        self, *, max_samples: int = DEFAULT_MAX_SAMPLES, horizon_s: float = DEFAULT_HORIZON_S
    ) -> None:
        """Create an empty window keeping at most ``max_samples`` outcomes of ``horizon_s``."""
        if max_samples < 1:
            raise ValueError(f"max_samples must be >= 1, got {max_samples}")
        if horizon_s <= 0:
            raise ValueError(f"horizon_s must be > 0, got {horizon_s}")
        self.max_samples = max_samples
        self.horizon_s = horizon_s
        self._items: deque[CallOutcome] = deque(maxlen=max_samples)
        self._newest = -math.inf

    def add(self, outcome: CallOutcome) -> None:
        """Record an outcome and evict what fell behind the horizon of the newest one."""
        self._items.append(outcome)
        self._newest = max(self._newest, outcome.at)
        cutoff = self._newest - self.horizon_s
        while self._items and self._items[0].at < cutoff:
            self._items.popleft()

    def outcomes(self, *, now: float, window_s: float) -> list[CallOutcome]:
        """Outcomes with ``now - window_s <= at <= now``, oldest first."""
        start = now - window_s
        return [o for o in self._items if start <= o.at <= now]

    def __len__(self) -> int:
        """How many outcomes are held (within the horizon and the count bound)."""
        return len(self._items)


def compute_stats(
    outcomes: Iterable[CallOutcome],
    *,
    now: float,
    window_s: float,
    min_calls: int,
    slow_call_ms: float | None = None,
    semantic_window_s: float | None = None,
    p95_limit_ms: float | None = None,
) -> WindowStats:
    """Aggregate the outcomes that finished in ``[now - window_s, now]``.

    * ``calls`` counts outcomes that count against the route (``counts_against_route``);
      those that do not (content filter, context length, invalid request: the caller's
      or the content's fault) are left out of every rate.
    * ``errors`` are failed calls that are not semantic failures; semantic failures
      (well-formed but unusable replies) feed ``semantic_failure_rate`` instead, over
      ``semantic_window_s`` when given (the breaker watches them over a longer window).
    * Latency percentiles cover every call counted against the route, probes included
      (``probes`` says how many were probes); TTFT percentiles cover calls that reported
      one. A call is slow when its latency exceeds ``slow_call_ms``.
    * ``enough_samples`` is ``calls >= min_calls``: below that, rates are not trusted;
      ``semantic_calls`` counts the semantic window, whose rate has its own minimum.
    * ``p95_limit_ms`` is passed through for the latency breaker.
    """
    outcomes = list(outcomes)
    start = now - window_s
    timely = [o for o in outcomes if start <= o.at <= now]
    in_window = [o for o in timely if o.counts_against_route]
    saturated = sum(o.error_class is ErrorClass.LOCAL_SATURATION for o in timely)
    calls = len(in_window)
    errors = sum(1 for o in in_window if not o.ok and not o.semantic_failure)
    slow = (
        sum(1 for o in in_window if o.latency_ms > slow_call_ms) if slow_call_ms is not None else 0
    )
    if semantic_window_s is None:
        sem_pool = in_window
    else:
        sem_start = now - semantic_window_s
        sem_pool = [o for o in outcomes if sem_start <= o.at <= now and o.counts_against_route]
    semantic = sum(1 for o in sem_pool if o.semantic_failure)
    latencies = [o.latency_ms for o in in_window]
    ttfts = [o.ttft_ms for o in in_window if o.ttft_ms is not None]
    return WindowStats(
        window_s=window_s,
        calls=calls,
        errors=errors,
        semantic_failures=semantic,
        local_saturations=saturated,
        slow_calls=slow,
        error_rate=errors / calls if calls else 0.0,
        semantic_failure_rate=semantic / len(sem_pool) if sem_pool else 0.0,
        slow_call_rate=slow / calls if calls else 0.0,
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        p99_ms=percentile(latencies, 99),
        ttft_p50_ms=percentile(ttfts, 50),
        ttft_p95_ms=percentile(ttfts, 95),
        ttft_p99_ms=percentile(ttfts, 99),
        enough_samples=calls >= min_calls,
        probes=sum(1 for o in in_window if o.probe),
        latency_samples=len(latencies),
        semantic_calls=len(sem_pool),
        p95_limit_ms=p95_limit_ms,
    )


def slow_call_threshold_ms(
    settings: BreakerSettings, baseline_p95_ms: float | None
) -> float | None:
    """The latency above which a call is slow: the absolute setting, else factor x baseline.

    ``baseline_p95_ms`` is the p95 the route shows when healthy (e.g. the store's
    long-horizon p95); None disables relative slow-call detection.
    """
    if settings.slow_call_ms is not None:
        return settings.slow_call_ms
    if baseline_p95_ms is None or baseline_p95_ms <= 0:
        return None
    return settings.slow_call_baseline_factor * baseline_p95_ms


def p95_limit_ms(settings: BreakerSettings, baseline_p95_ms: float | None) -> float | None:
    """The window p95 above which the latency breaker trips: factor x the baseline p95
    (None when the rule is off or the route has no baseline yet)."""
    factor = settings.p95_baseline_factor
    if factor is None or baseline_p95_ms is None or baseline_p95_ms <= 0:
        return None
    return factor * baseline_p95_ms


def breaker_stats(
    outcomes: Iterable[CallOutcome],
    settings: BreakerSettings,
    *,
    now: float,
    baseline_p95_ms: float | None = None,
) -> WindowStats:
    """The stats :func:`resilience.breaker.on_outcome` expects, with the breaker's windows.

    Errors and slow calls over ``error_window_s``, semantic failures over
    ``semantic_window_s``, ``min_calls`` from the settings.
    """
    return compute_stats(
        outcomes,
        now=now,
        window_s=settings.error_window_s,
        min_calls=settings.min_calls,
        slow_call_ms=slow_call_threshold_ms(settings, baseline_p95_ms),
        semantic_window_s=settings.semantic_window_s,
        p95_limit_ms=p95_limit_ms(settings, baseline_p95_ms),
    )
