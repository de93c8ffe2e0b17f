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
from collections.abc import Iterable, Sequence
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
    search_attributes_skipped: Any
    cost: Any
    shadow_samples: Any
    shadow_agreement: Any
    quality_regressions: Any
    reruns: Any
    budget_refusals: Any
    local_saturations: Any


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


@dataclass(frozen=True)
class _Spec:
    """One instrument as data: its metric name, description, unit and bucket advice."""

    name: str
    description: str
    unit: str = ""
    buckets: Sequence[float] | None = None  # histograms only


#: ``Instruments`` field -> histogram.
_HISTOGRAMS = {
    "duration": _Spec(
        names.GEN_AI_CLIENT_OPERATION_DURATION, "GenAI operation duration", "s", DURATION_BUCKETS
    ),
    "tokens": _Spec(
        names.GEN_AI_CLIENT_TOKEN_USAGE,
        "Number of input and output tokens used",
        "{token}",
        TOKEN_BUCKETS,
    ),
    "ttfc": _Spec(
        names.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK,
        "Time to the first streamed chunk",
        "s",
        DURATION_BUCKETS,
    ),
    "cascade_depth": _Spec(
        names.CASCADE_DEPTH, "Attempts one call took", "{attempt}", [1, 2, 3, 4, 5, 6, 8, 10]
    ),
    "restoration": _Spec(
        names.RESTORATION_TIME,
        "From a breaker opening to its closing again",
        "s",
        [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600],
    ),
    "cache_age": _Spec(names.CACHE_AGE, "Age of cached answers served", "s"),
    "shadow_agreement": _Spec(
        names.SHADOW_AGREEMENT,
        "Agreement of shadowed answers with the reference route",
        "1",
        [0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0],
    ),
}
#: ``Instruments`` field -> counter.
_COUNTERS = {
    "attempts": _Spec(names.ATTEMPTS, "Model call attempts by route and outcome"),
    "substitutions": _Spec(names.SUBSTITUTIONS, "Failovers from a failed attempt"),
    "answers": _Spec(names.ANSWERS, "Answers by served tier and capability"),
    "transitions": _Spec(names.BREAKER_TRANSITIONS, "Breaker transitions"),
    "validations": _Spec(names.VALIDATIONS, "Semantic validation results"),
    "hedges": _Spec(names.HEDGES, "Hedges fired, won and cancelled"),
    "probes": _Spec(names.PROBES, "Health probes"),
    "probes_skipped": _Spec(names.PROBES_SKIPPED, "Probe rounds that sent nothing"),
    "cache_lookups": _Spec(names.CACHE_LOOKUPS, "Response cache lookups"),
    "compensations": _Spec(names.COMPENSATIONS, "Saga compensations"),
    "escalations": _Spec(names.ESCALATIONS, "Human escalations"),
    "store_degraded": _Spec(names.STORE_DEGRADED, "Shared store degradations"),
    "search_attributes_skipped": _Spec(
        names.SEARCH_ATTRIBUTES_SKIPPED, "Runs that skipped their search-attribute upserts"
    ),
    "cost": _Spec(names.COST, "Cost of answered attempts and billed rejected bodies", "USD"),
    "shadow_samples": _Spec(names.SHADOW_SAMPLES, "Shadow-evaluation samples"),
    "quality_regressions": _Spec(names.QUALITY_REGRESSIONS, "Quality regressions found and lifted"),
    "reruns": _Spec(names.RERUNS, "Degraded re-runs by outcome"),
    "budget_refusals": _Spec(names.RATE_BUDGET_REFUSALS, "Calls refused by a shared rate budget"),
    "local_saturations": _Spec(
        names.LOCAL_SATURATIONS, "Calls that found all of the worker's connection slots busy"
    ),
}


def _build(m: metrics.Meter) -> Instruments:
    m.create_observable_gauge(
        names.BREAKER_STATE,
        callbacks=[_observe_breakers],
        description="Breaker state per route: 0 closed, 1 half-open, 2 open",
    )
    built: dict[str, Any] = {
        field: m.create_histogram(
            s.name,
            unit=s.unit,
            description=s.description,
            explicit_bucket_boundaries_advisory=s.buckets,
        )
        for field, s in _HISTOGRAMS.items()
    }
    for field, s in _COUNTERS.items():
        built[field] = m.create_counter(s.name, unit=s.unit, description=s.description)
    return Instruments(**built)


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
