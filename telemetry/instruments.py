"""The project's metric instruments, built once per installed meter provider.

Activities and workflow code call :func:`instruments` at the moment they record (a cheap
identity check), so a provider installed after import, or replaced in tests, is always the
one recorded to. Workflow-side recordings go through ``ReplaySafeMeterProvider`` (see
:mod:`agent_failover.telemetry.setup`) and are not repeated on replay.

The breaker-state gauge is observable: activities note every state they see
(:func:`note_breaker_state`) and the gauge reports the last one per route.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.metrics import _internal as _metrics_internal
from opentelemetry.metrics._internal import _ProxyMeterProvider

from agent_failover.telemetry import names

#: Gauge values of the breaker states (closed is healthy, so lowest).
BREAKER_STATE_VALUES = {
    "closed": 0,
    "forced_closed": 0,
    "half_open": 1,
    "open": 2,
    "forced_open": 2,
}
#: Token histogram buckets: powers of four up to ~4M (the GenAI conventions' advice).
TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
#: Duration buckets in seconds (GenAI conventions' advice, up to ~82 s).
DURATION_BUCKETS = [
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
]

_lock = threading.Lock()
_breaker_states: dict[str, str] = {}
_opened_at: dict[str, float] = {}


@dataclass(frozen=True)
class Instruments:
    """Every instrument agent-failover records to."""

    duration: Any
    tokens: Any
    ttfc: Any
    attempts: Any
    substitutions: Any
    answers: Any
    cascade_depth: Any
    transitions: Any
    restoration: Any
    validations: Any
    hedges: Any
    probes: Any
    probes_skipped: Any
    cache_lookups: Any
    cache_age: Any
    compensations: Any
    escalations: Any
    store_degraded: Any
    cost: Any
    shadow_samples: Any
    shadow_agreement: Any
    quality_regressions: Any
    reruns: Any
    budget_refusals: Any


_cache: tuple[object, Instruments] | None = None


def enabled() -> bool:
    """True once a real meter provider is installed; recorders return at once otherwise
    (nothing configured must cost nothing on the hot path)."""
    # The installed provider itself (None until one is set), without the environment
    # read get_meter_provider() makes on every call.
    provider = _metrics_internal._METER_PROVIDER
    return provider is not None and not isinstance(provider, _ProxyMeterProvider)


def instruments() -> Instruments:
    """The instruments of the current global meter provider (built on first use)."""
    global _cache
    provider = _metrics_internal._METER_PROVIDER  # None until set: the proxy's instruments
    cached = _cache
    if cached is not None and cached[0] is provider:
        return cached[1]
    with _lock:
        built = _build(metrics.get_meter(names.METER_NAME))
        _cache = (provider, built)
    return built


def _build(m: metrics.Meter) -> Instruments:
    hist = m.create_histogram
    count = m.create_counter
    m.create_observable_gauge(
        names.BREAKER_STATE,
        callbacks=[_observe_breakers],
        description="Breaker state per route: 0 closed, 1 half-open, 2 open",
    )
    return Instruments(
        duration=hist(
            names.GEN_AI_CLIENT_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        ),
        tokens=hist(
            names.GEN_AI_CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        ),
        ttfc=hist(
            names.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time to the first streamed chunk",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        ),
        attempts=count(names.ATTEMPTS, description="Model call attempts by route and outcome"),
        substitutions=count(names.SUBSTITUTIONS, description="Failovers from a failed attempt"),
        answers=count(names.ANSWERS, description="Answers by served tier and capability"),
        cascade_depth=hist(
            names.CASCADE_DEPTH,
            unit="{attempt}",
            description="Attempts one call took",
            explicit_bucket_boundaries_advisory=[1, 2, 3, 4, 5, 6, 8, 10],
        ),
        transitions=count(names.BREAKER_TRANSITIONS, description="Breaker transitions"),
        restoration=hist(
            names.RESTORATION_TIME,
            unit="s",
            description="From a breaker opening to its closing again",
            explicit_bucket_boundaries_advisory=[1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600],
        ),
        validations=count(names.VALIDATIONS, description="Semantic validation results"),
        hedges=count(names.HEDGES, description="Hedges fired, won and cancelled"),
        probes=count(names.PROBES, description="Health probes"),
        probes_skipped=count(names.PROBES_SKIPPED, description="Probe rounds that sent nothing"),
        cache_lookups=count(names.CACHE_LOOKUPS, description="Response cache lookups"),
        cache_age=hist(names.CACHE_AGE, unit="s", description="Age of cached answers served"),
        compensations=count(names.COMPENSATIONS, description="Saga compensations"),
        escalations=count(names.ESCALATIONS, description="Human escalations"),
        store_degraded=count(names.STORE_DEGRADED, description="Shared store degradations"),
        cost=count(names.COST, unit="USD", description="Cost of answered attempts"),
        shadow_samples=count(names.SHADOW_SAMPLES, description="Shadow-evaluation samples"),
        shadow_agreement=hist(
            names.SHADOW_AGREEMENT,
            unit="1",
            description="Agreement of shadowed answers with the reference route",
            explicit_bucket_boundaries_advisory=[0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0],
        ),
        quality_regressions=count(
            names.QUALITY_REGRESSIONS, description="Quality regressions found and lifted"
        ),
        reruns=count(names.RERUNS, description="Degraded re-runs by outcome"),
        budget_refusals=count(
            names.RATE_BUDGET_REFUSALS, description="Calls refused by a shared rate budget"
        ),
    )


def note_breaker_state(route: str, state: str, *, at: float | None = None) -> float | None:
    """Remember ``route``'s breaker state for the gauge; returns the seconds since it opened
    when this closes a breaker this process saw open (the time to restoration), else None."""
    with _lock:
        previous = _breaker_states.get(route)
        _breaker_states[route] = state
        if state in ("open", "forced_open") and route not in _opened_at and at is not None:
            _opened_at[route] = at
        if state == "closed" and previous != "closed":
            opened = _opened_at.pop(route, None)
            if opened is not None and at is not None:
                return max(0.0, at - opened)
    return None


def _observe_breakers(_options: CallbackOptions) -> Iterable[Observation]:
    with _lock:
        states = dict(_breaker_states)
    for route, state in sorted(states.items()):
        yield Observation(BREAKER_STATE_VALUES.get(state, 2), {"route": route})


def reset_breaker_states() -> None:
    """Forget the breaker states seen (tests)."""
    with _lock:
        _breaker_states.clear()
        _opened_at.clear()
