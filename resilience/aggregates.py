"""Running aggregates of a route's outcomes: per-second buckets of counts and histograms.

The health stores keep no list of outcomes. Each outcome that counts against its route
increments a few counters (:func:`bucket_fields`): in the bucket of the second it finished
in, ``c`` calls, ``e`` errors (not semantic), ``s`` semantic failures, ``p`` probes; in the
:data:`HIST_BUCKET_S`-second histogram bucket, ``l<bin>`` its latency bin and ``t<bin>``
its time-to-first-token bin. A window is the sum of the buckets it covers
(:func:`window_seconds`, :func:`hist_buckets`, :func:`merge_fields`), and
:func:`stats_from_fields` turns that sum into the :class:`~resilience.contracts.WindowStats`
the planner and the breaker read. Recording is a handful of increments; a snapshot merges
one small bucket per second of window (five counters) and one histogram per ten seconds
(at most a few dozen occupied bins), so its cost is bounded by the window length and the
number of bins, not by how many calls the window holds. Counts and rates are exact to the
second; percentiles and slow calls to the ten seconds.

Percentiles are read from log bins :data:`WINDOW_BIN_RATIO` wide (2 %) and report the bin's
upper edge: never below the true nearest-rank value and at most 2 % above it, which is
exact enough for an SLA threshold and never hides slowness. A call counts as slow when its
whole bin lies above the slow-call threshold, so a bin straddling the threshold never trips
the breaker on calls that were not slow. Windows are whole seconds: a window of ``w``
seconds ending at ``now`` covers the seconds ``floor(now - w) .. floor(now)``.

The same functions serve the in-memory store (dicts) and the Redis store (hashes updated
by Lua ``HINCRBY``), so both have identical semantics. Pure: ``now`` is always an argument.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import (
    BreakerState,
    CallOutcome,
    RecentSample,
    WindowStats,
)
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.windows import p95_limit_ms, slow_call_threshold_ms

#: Width of one count bucket, in seconds.
BUCKET_S = 1
#: Width of one histogram bucket, in seconds (percentiles need less time resolution).
HIST_BUCKET_S = 10
#: Ratio between the upper edges of two neighbouring latency bins of the window histograms.
WINDOW_BIN_RATIO = 1.02
#: Highest bin (1.02**900 ms is about 56 years; larger latencies land here).
MAX_WINDOW_BIN = 900
#: Width of the buckets the short latency baseline is kept in (ok latencies per minute).
MINUTE_S = 60
_LOG = math.log(WINDOW_BIN_RATIO)

Fields = Mapping[str, int]


def second_of(at: float) -> int:
    """The bucket (whole seconds since the epoch) an outcome finishing at ``at`` falls in."""
    return math.floor(at)


def minute_of(at: float) -> int:
    """The minute bucket of ``at`` (used by the short baseline)."""
    return math.floor(at / MINUTE_S)


def window_bin(latency_ms: float) -> int:
    """The smallest ``i`` with ``WINDOW_BIN_RATIO**i >= latency_ms`` (0 for 1 ms or less)."""
    if latency_ms <= 1.0:
        return 0
    return min(MAX_WINDOW_BIN, math.ceil(math.log(latency_ms) / _LOG - 1e-9))


def bin_upper(b: int) -> float:
    """Upper edge of bin ``b`` in ms: what a percentile read from the histogram reports."""
    return WINDOW_BIN_RATIO**b


def window_seconds(
    now: float, window_s: float, horizon_s: float, after: float | None = None
) -> range:
    """The buckets a window of ``window_s`` ending at ``now`` covers, newest first.

    Capped at ``horizon_s`` (the stores hold nothing older) and, with ``after``, to the
    seconds wholly after it (see :func:`breaker_epoch`).
    """
    last = second_of(now)
    first = max(second_of(now - window_s), second_of(now - horizon_s))
    if after is not None:
        first = max(first, second_of(after) + 1)
    return range(last, first - 1, -1)


def breaker_epoch(state: BreakerState, since: float) -> float | None:
    """Outcomes before this do not count towards the breaker's next trip.

    A breaker that closed after an outage (half-open trials passed, or an operator's
    release) starts from a clean window, as resilience4j resets its ring buffer: the
    outage's errors, still inside the error window after a fast return, would otherwise
    re-trip it on the very next outcome (flapping). None for a breaker never tripped.
    """
    if state is BreakerState.CLOSED and since > 0:
        return since
    return None


def hist_buckets(
    now: float, window_s: float, horizon_s: float, after: float | None = None
) -> range:
    """The histogram buckets (``floor(at / HIST_BUCKET_S)``) a window covers, newest first
    (with ``after``: only those wholly after it, never fewer than the newest one)."""
    last = math.floor(now / HIST_BUCKET_S)
    first = math.floor(max(now - window_s, now - horizon_s) / HIST_BUCKET_S)
    if after is not None:
        first = min(last, max(first, math.floor(after / HIST_BUCKET_S) + 1))
    return range(last, first - 1, -1)


def hist_bucket_of(at: float) -> int:
    """The histogram bucket an outcome finishing at ``at`` falls in."""
    return math.floor(at / HIST_BUCKET_S)


def split_fields(fields: Fields) -> tuple[dict[str, int], dict[str, int]]:
    """(counts for the second's bucket, histogram bins for the ten-second bucket)."""
    counts = {k: n for k, n in fields.items() if k[0] not in "lt"}
    return counts, {k: n for k, n in fields.items() if k[0] in "lt"}


def minute_buckets(now: float, horizon_s: float) -> range:
    """The minute buckets of the short baseline's horizon at ``now``, newest first."""
    last = minute_of(now)
    return range(last, minute_of(now - horizon_s) - 1, -1)


#: Bucket field of a call that found the worker's own connection slots busy (no rate).
SATURATED = "x"

#: Separates a latency bin from the role it was observed for (``l<bin>@<role>``); a probe
#: is ``l<bin>@`` (role names never contain ``@``).
ROLE_SEP = "@"


def bucket_fields(outcome: CallOutcome) -> dict[str, int]:
    """The increments ``outcome`` adds to its second's bucket (empty if it does not count).

    Outcomes that do not count against the route (429s, the caller's fault) are left out
    of every rate, exactly as the windows always did. The latency bin is counted twice:
    for the route, and for the role the call was made for (``l<bin>@<role>``; a probe
    under ``l<bin>@``), so a role's SLA can be judged on its own calls plus probes.
    """
    if outcome.error_class is ErrorClass.LOCAL_SATURATION:
        # Our own saturation: counted for operators under its own field, in no rate.
        return {SATURATED: 1}
    if not outcome.counts_against_route:
        return {}
    latency_bin_ = window_bin(outcome.latency_ms)
    f = {"c": 1, f"l{latency_bin_}": 1}
    if outcome.probe:
        f[f"l{latency_bin_}{ROLE_SEP}"] = 1
    elif outcome.role:
        f[f"l{latency_bin_}{ROLE_SEP}{outcome.role}"] = 1
    if not outcome.ok:
        f["s" if outcome.semantic_failure else "e"] = 1
    if outcome.probe:
        f["p"] = 1
    if outcome.ttft_ms is not None:
        f[f"t{window_bin(outcome.ttft_ms)}"] = 1
    return f


def baseline_bin(outcome: CallOutcome) -> int | None:
    """The minute-bucket bin of a successful counted call (the short baseline), else None."""
    if outcome.ok and outcome.counts_against_route:
        return window_bin(outcome.latency_ms)
    return None


def merge_fields(buckets: Iterable[Fields]) -> dict[str, int]:
    """Sum buckets field by field."""
    total: dict[str, int] = {}
    for b in buckets:
        for k, n in b.items():
            total[k] = total.get(k, 0) + n
    return total


def histogram(fields: Fields, prefix: str) -> dict[int, int]:
    """The bin -> count histogram under ``prefix`` (``"l"`` latency, ``"t"`` TTFT)."""
    return {
        int(k[1:]): n for k, n in fields.items() if k[0] == prefix and n > 0 and ROLE_SEP not in k
    }


def role_histogram(fields: Fields, role: str) -> dict[int, int]:
    """The latency histogram of ``role``'s own calls plus the probes."""
    hist: dict[int, int] = {}
    for k, n in fields.items():
        if k[0] != "l" or ROLE_SEP not in k or n <= 0:
            continue
        b, owner = k[1:].split(ROLE_SEP, 1)
        if owner in ("", role):
            hist[int(b)] = hist.get(int(b), 0) + n
    return hist


def role_latency_stats(fields: Fields, role: str, *, window_s: float) -> WindowStats:
    """Latency percentiles of ``role``'s calls on the route plus its probes, over the
    merged window ``fields`` (what :func:`resilience.sla.evaluate_sla` judges the role on:
    a slow role sharing the route does not demote it for a fast one)."""
    hist = role_histogram(fields, role)
    n = sum(hist.values())
    probes = sum(v for k, v in fields.items() if k.startswith("l") and k.endswith(ROLE_SEP))
    return WindowStats(
        window_s=window_s,
        calls=n,
        p50_ms=hist_percentile(hist, 50),
        p95_ms=hist_percentile(hist, 95),
        p99_ms=hist_percentile(hist, 99),
        enough_samples=n > 0,
        probes=probes,
        latency_samples=n,
    )


def hist_percentile(hist: Mapping[int, int], q: float) -> float | None:
    """Nearest-rank ``q``-th percentile of a bin histogram, as the bin's upper edge."""
    n = sum(hist.values())
    if n == 0:
        return None
    rank = max(1, math.ceil(q / 100.0 * n))
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen >= rank:
            return bin_upper(b)
    return bin_upper(max(hist))


def slow_count(hist: Mapping[int, int], slow_call_ms: float | None) -> int:
    """Calls whose whole bin lies above ``slow_call_ms`` (bin ``b`` holds ``(r**(b-1), r**b]``)."""
    if slow_call_ms is None:
        return 0
    return sum(n for b, n in hist.items() if b > 0 and bin_upper(b - 1) >= slow_call_ms)


def stats_from_fields(
    fields: Fields,
    *,
    window_s: float,
    min_calls: int,
    slow_call_ms: float | None = None,
    semantic: Fields | None = None,
    p95_limit: float | None = None,
) -> WindowStats:
    """The :class:`WindowStats` of a merged window (see :func:`resilience.windows.compute_stats`).

    ``semantic`` is the merged window semantic failures are counted over (the breaker
    watches them over a longer window); ``fields`` itself when None.
    """
    calls = fields.get("c", 0)
    errors = fields.get("e", 0)
    sem = semantic if semantic is not None else fields
    sem_calls, sem_failures = sem.get("c", 0), sem.get("s", 0)
    lat, ttft = histogram(fields, "l"), histogram(fields, "t")
    slow = slow_count(lat, slow_call_ms)
    return WindowStats(
        window_s=window_s,
        calls=calls,
        errors=errors,
        semantic_failures=sem_failures,
        local_saturations=fields.get(SATURATED, 0),
        slow_calls=slow,
        error_rate=errors / calls if calls else 0.0,
        semantic_failure_rate=sem_failures / sem_calls if sem_calls else 0.0,
        slow_call_rate=slow / calls if calls else 0.0,
        p50_ms=hist_percentile(lat, 50),
        p95_ms=hist_percentile(lat, 95),
        p99_ms=hist_percentile(lat, 99),
        ttft_p50_ms=hist_percentile(ttft, 50),
        ttft_p95_ms=hist_percentile(ttft, 95),
        ttft_p99_ms=hist_percentile(ttft, 99),
        enough_samples=calls >= min_calls,
        probes=fields.get("p", 0),
        latency_samples=sum(lat.values()),
        semantic_calls=sem_calls,
        p95_limit_ms=p95_limit,
    )


def short_baseline_p95(hist: Mapping[int, int], *, min_samples: int) -> float | None:
    """p95 of the successful calls of the short horizon (None below ``min_samples``)."""
    if sum(hist.values()) < min_samples:
        return None
    return hist_percentile(hist, 95)


def encode_recent(outcome: CallOutcome) -> str:
    """One ``recent`` entry (``at|latency|ok``, then ``|role`` for a role's call), or "" if
    the outcome does not count."""
    if not outcome.counts_against_route:
        return ""
    entry = f"{outcome.at!r}|{outcome.latency_ms!r}|{int(outcome.ok)}"
    role = outcome.role
    # A role the separators could break is left out: the call then counts for every role.
    if role and not outcome.probe and "|" not in role and ";" not in role:
        entry += f"|{role}"
    return entry


def decode_recent(
    entries: Iterable[str], *, now: float, keep: int, role: str | None = None
) -> list[RecentSample]:
    """The newest ``keep`` entries up to ``now``, oldest first; with ``role``, only that
    role's calls and the entries of no role (probes, and calls recorded without one): a
    role's SLA streaks are judged on its own calls on the route plus probes."""
    if not keep:
        return []
    parsed: list[tuple[float, str, str]] = []
    for e in entries:
        at, lat, ok, *tag = e.split("|")
        if role is not None and tag and tag[0] != role:
            continue
        t = float(at)
        if t <= now:
            parsed.append((t, lat, ok))
    parsed.sort(key=_first)  # stable: entries of the same time keep their order
    # Only the kept entries become models (a route's ring holds many more).
    kept = parsed[-keep:]
    return [RecentSample(at=t, latency_ms=float(lat), ok=ok == "1") for t, lat, ok in kept]


def _first(item: tuple[float, str, str]) -> float:
    return item[0]


def breaker_stats_from(
    error_window: Fields,
    semantic_window: Fields,
    settings: BreakerSettings,
    *,
    baseline_p95_ms: float | None,
) -> WindowStats:
    """What :func:`resilience.breaker.on_outcome` reads, from the two merged breaker windows
    (errors and slow calls over ``error_window_s``, semantic failures over
    ``semantic_window_s``)."""
    return stats_from_fields(
        error_window,
        window_s=settings.error_window_s,
        min_calls=settings.min_calls,
        slow_call_ms=slow_call_threshold_ms(settings, baseline_p95_ms),
        semantic=semantic_window,
        p95_limit=p95_limit_ms(settings, baseline_p95_ms),
    )
