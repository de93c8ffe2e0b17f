"""Outage drills: a fault timeline replayed at a fixed request rate, and what it did.

A drill file is a simulator scenario (``events``: fault windows, see
:mod:`agent_failover.testing.sim.scenario`) plus a ``drill`` section saying how to load it:
requests per second (open loop: request *i* starts at ``i / rate`` whatever the earlier
ones are doing), how long, which role, which endpoint is the primary. This module holds
the pure part: the file model, the per-request :class:`Sample`, and :func:`summarise`,
which turns samples and the simulator's attempts log into per-phase figures (success
rate, share per tier, p50/p95/p99, detection and restoration time, amplification with
and without probes, probe calls per minute, cost relative to all-primary). The runner
that produces samples lives in :mod:`agent_failover.testing.drill_run`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_failover.resilience.percentile import percentile
from agent_failover.testing.sim.scenario import Scenario

#: A request is answered (some tier), explicitly escalated (a typed "nobody can answer"),
#: or failed (an error the caller did not ask for, or no answer before the timeout).
Outcome = Literal["answered", "escalated", "failed"]


class DrillSettings(BaseModel):
    """How the drill loads the timeline (the ``drill:`` section of a drill file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rate_per_s: float = Field(default=4.0, gt=0.0, le=100.0, description="open-loop rate")
    duration_s: float = Field(default=60.0, gt=0.0, le=3600.0)
    role: str = "plain"
    primary: str = "anthropic-us-east"
    max_requests: int = Field(default=2000, ge=1, le=100_000, description="hard cap")
    request_timeout_s: float = Field(default=60.0, gt=0.0, le=600.0)
    max_tokens: int = Field(default=64, ge=1, le=4096)


class DrillFile(BaseModel):
    """A drill: the fault timeline and the load settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: Scenario
    drill: DrillSettings = Field(default_factory=DrillSettings)

    @model_validator(mode="before")
    @classmethod
    def _split(cls, data: Any) -> Any:
        # The file is a scenario with an extra ``drill`` key; the simulator gets the rest.
        if isinstance(data, dict) and "scenario" not in data:
            data = dict(data)
            settings = data.pop("drill", {}) or {}
            return {"scenario": data, "drill": settings}
        return data

    @model_validator(mode="after")
    def _covers(self) -> DrillFile:
        end = self.scenario.duration_s
        if end is None:
            raise ValueError("scenario: every event needs 'to' (a drill must end)")
        if end > self.drill.duration_s:
            raise ValueError(
                f"drill.duration_s ({self.drill.duration_s}) ends before the last fault ({end})"
            )
        return self

    @property
    def requests(self) -> int:
        """How many requests the drill starts (rate x duration, capped)."""
        return min(self.drill.max_requests, int(self.drill.rate_per_s * self.drill.duration_s))

    def fault_window(self) -> tuple[float, float]:
        """First fault start and last fault end, in seconds after load."""
        starts = [e.start_s for e in self.scenario.events]
        ends = [e.end_s or 0.0 for e in self.scenario.events]
        return min(starts), max(ends)

    def phases(self) -> list[tuple[str, float, float]]:
        """``before`` the first fault, ``fault`` until the last ends, ``after`` to the end."""
        return timeline_phases(self.fault_window(), self.drill.duration_s)

    def fault_events(self) -> list[tuple[float, float, str]]:
        """Each event's window and label (its note, else its faults)."""
        return [
            (e.start_s, e.end_s or 0.0, e.note or ",".join(f.label for f in e.faults))
            for e in self.scenario.events
        ]

    def scaled(self, factor: float) -> DrillFile:
        """The same drill with every time (faults and duration) multiplied by ``factor``."""
        if factor <= 0:
            raise ValueError(f"time scale must be > 0, got {factor}")
        data = self.model_dump(mode="json", by_alias=True)
        for ev in data["scenario"]["events"]:
            ev["from"] = ev["from"] * factor
            if ev.get("to") is not None:
                ev["to"] = ev["to"] * factor
        data["drill"]["duration_s"] *= factor
        return DrillFile.model_validate(data)


def timeline_phases(
    window: tuple[float, float] | None, duration_s: float
) -> list[tuple[str, float, float]]:
    """``before``/``fault``/``after`` around a fault window (``all`` without one)."""
    if window is None:
        return [("all", 0.0, duration_s)]
    start, end = window
    out = [("before", 0.0, start), ("fault", start, end), ("after", end, duration_s)]
    return [p for p in out if p[2] > p[1]]


def load_drill(path: str | Path) -> DrillFile:
    """Read and validate a drill file; errors name the file and the field."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{p}: cannot read drill file: {exc}") from exc
    try:
        return DrillFile.model_validate(raw)
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from exc


@dataclass
class Sample:
    """One request of the drill."""

    index: int
    start_s: float  # seconds after the timeline was loaded
    ttfa_s: float | None  # time to answer (None: no answer)
    outcome: Outcome
    tier: int | None = None
    route: str | None = None
    attempts: int = 0  # upstream calls this request made (probes excluded)
    cost_usd: float = 0.0
    primary_cost_usd: float = 0.0  # the same tokens at the primary's prices
    error: str | None = None

    @property
    def done_s(self) -> float | None:
        """When the answer arrived, in seconds after load."""
        return None if self.ttfa_s is None else self.start_s + self.ttfa_s

    def as_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return asdict(self)


def _pcts(values: list[float]) -> dict[str, float | None]:
    return {
        f"p{q}_ms": None if not values else round((percentile(values, q) or 0.0) * 1000, 1)
        for q in (50, 95, 99)
    }


def phase_figures(
    samples: list[Sample],
    upstream_arrivals: list[float],
    start: float,
    end: float,
    *,
    upstream_until: float | None = None,
    background_calls: bool = True,
) -> dict[str, Any]:
    """Figures for requests started in ``[start, end)`` and upstream calls arriving there.

    ``upstream_until`` stretches the upstream window past ``end`` (the last phase owns
    the calls its late requests make after the timeline ended). Without
    ``background_calls`` (an arm that never probes) every upstream call is a request's,
    which also counts the retries an arm cannot report itself (an SDK's own retries).
    """
    mine = [s for s in samples if start <= s.start_s < end]
    ok = [s for s in mine if s.outcome != "failed"]
    answered = [s for s in mine if s.outcome == "answered"]
    tiers: dict[str, int] = {}
    for s in answered:
        key = str(s.tier)
        tiers[key] = tiers.get(key, 0) + 1
    n = len(mine)
    until = end if upstream_until is None else upstream_until
    upstream = sum(1 for a in upstream_arrivals if start <= a < until)
    request_calls = sum(s.attempts for s in mine) if background_calls else upstream
    probes = max(0, upstream - request_calls)
    # Rates use the phase's own length, not the stretched upstream window.
    minutes = max(1e-9, (end - start) / 60.0)
    primary_cost = sum(s.primary_cost_usd for s in answered)
    return {
        "requests": n,
        "success_rate": None if not n else round(len(ok) / n, 4),
        "escalated": sum(1 for s in mine if s.outcome == "escalated"),
        "failed": n - len(ok),
        "tier_share": {k: round(v / max(1, len(answered)), 4) for k, v in sorted(tiers.items())},
        **_pcts([s.ttfa_s for s in ok if s.ttfa_s is not None]),
        "amplification": None if not ok else round(request_calls / len(ok), 3),
        "amplification_with_probes": None if not ok else round(upstream / len(ok), 3),
        "probe_calls_per_min": round(probes / minutes, 2),
        "cost_vs_all_primary": None
        if not primary_cost
        else round(sum(s.cost_usd for s in answered) / primary_cost, 3),
    }


def detection_s(samples: list[Sample], fault_start: float, primary: str) -> float | None:
    """Fault start to the first answer from anything but the primary (None: never)."""
    done = [
        s.done_s
        for s in samples
        if s.outcome == "answered"
        and s.route != primary
        and s.done_s is not None
        and s.done_s >= fault_start
    ]
    return None if not done else round(min(done) - fault_start, 3)


def restoration_s(samples: list[Sample], recovery: float, primary: str) -> float | None:
    """Recovery to the first primary answer to a request started after it (None: never)."""
    done = [
        s.done_s
        for s in samples
        if s.route == primary and s.start_s >= recovery and s.done_s is not None
    ]
    return None if not done else round(min(done) - recovery, 3)


def _last_flags(items: list[Any]) -> list[bool]:
    return [i == len(items) - 1 for i in range(len(items))]


def summarise(
    drill: DrillFile,
    samples: list[Sample],
    upstream_arrivals: list[float],
    *,
    background_calls: bool = True,
) -> dict[str, Any]:
    """The drill's report: per-phase figures plus detection and restoration times.

    ``upstream_arrivals`` are the simulator's attempt arrival times (seconds after load),
    probes included; the difference to the requests' own attempts is the probe load.
    """
    return summarise_timeline(
        name=drill.scenario.name,
        description=drill.scenario.description,
        settings=drill.drill,
        events=drill.fault_events(),
        samples=samples,
        upstream_arrivals=upstream_arrivals,
        background_calls=background_calls,
    )


def summarise_timeline(
    *,
    name: str,
    description: str,
    settings: DrillSettings,
    events: list[tuple[float, float, str]],
    samples: list[Sample],
    upstream_arrivals: list[float],
    background_calls: bool = True,
) -> dict[str, Any]:
    """Per-phase figures (around the fault ``events``' window) plus detection and
    restoration times: the report of a drill, or of a recorded incident's replay."""
    window = (min(e[0] for e in events), max(e[1] for e in events)) if events else None
    phases = timeline_phases(window, settings.duration_s)
    primary = settings.primary

    def figures(a: float, b: float, last: bool) -> dict[str, Any]:
        return phase_figures(
            samples,
            upstream_arrivals,
            a,
            b,
            upstream_until=math.inf if last else None,
            background_calls=background_calls,
        )

    return {
        "scenario": name,
        "description": description.strip(),
        "settings": settings.model_dump(),
        "fault_window_s": list(window) if window else None,
        "fault_events": [list(e) for e in events],
        "phases": {
            p: figures(a, b, last)
            for (p, a, b), last in zip(phases, _last_flags(phases), strict=True)
        },
        "overall": figures(0.0, settings.duration_s, True),
        "detection_s": None if window is None else detection_s(samples, window[0], primary),
        "restoration_s": None if window is None else restoration_s(samples, window[1], primary),
    }
