"""Builders and hypothesis strategies shared by the resilience tests."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from agent_failover.resilience.contracts import CallOutcome, WindowStats
from agent_failover.resilience.errors import ErrorClass

# Property tests must stay fast on a 2-core CI box and never flake on timing; applied
# per test (not as a global profile) so other suites keep their own settings.
PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ok(route: str, at: float, latency_ms: float = 100.0, **kw: object) -> CallOutcome:
    """A successful call outcome."""
    return CallOutcome(route=route, at=at, ok=True, latency_ms=latency_ms, **kw)


def fail(
    route: str,
    at: float,
    error_class: ErrorClass = ErrorClass.SERVER_ERROR,
    latency_ms: float = 100.0,
    **kw: object,
) -> CallOutcome:
    """A failed call outcome of ``error_class``."""
    return CallOutcome(
        route=route, at=at, ok=False, error_class=error_class, latency_ms=latency_ms, **kw
    )


def rate_limited(route: str, at: float, retry_after_s: float | None, **kw: object) -> CallOutcome:
    """A 429 as the classifier reports it: a cool-down signal, not counted against the route."""
    return fail(
        route,
        at,
        ErrorClass.RATE_LIMITED,
        retry_after_s=retry_after_s,
        counts_against_route=False,
        **kw,
    )


def stats(**kw: object) -> WindowStats:
    """WindowStats with enough samples unless told otherwise."""
    kw.setdefault("enough_samples", True)
    kw.setdefault("calls", 20)
    kw.setdefault("latency_samples", 20)
    return WindowStats(**kw)


latencies = st.lists(
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=200,
)


def reference_percentile(values: list[float], q: float) -> float:
    """Nearest rank by the textbook definition, written independently of the code."""
    ordered = sorted(values)
    n = len(ordered)
    for rank in range(1, n + 1):
        if rank / n * 100 >= q - 1e-9:
            return ordered[rank - 1]
    return ordered[-1]
