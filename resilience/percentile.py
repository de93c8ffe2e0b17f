"""The nearest-rank percentile: the one statistic the breaker windows, the SLA, the
qualification verdicts and the reports share. It sits below them all (it imports nothing
of ours), so a value module such as :mod:`resilience.qualification` can use it without
reaching up into the windows that depend on the policy config.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (``0 <= q <= 100``) of ``values``, or None if empty.

    Nearest rank: sort ascending and take the element at 1-based rank ``ceil(q/100 * n)``
    (rank 1 for ``q == 0``). The result is always an observed value, never interpolated,
    so "p95 = 812 ms" means some call really took 812 ms.
    """
    if not 0.0 <= q <= 100.0 or math.isnan(q):
        raise ValueError(f"percentile q must be within [0, 100], got {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])
