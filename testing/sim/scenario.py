"""Fault timelines: scenario files that switch faults on and off relative to load time.

A scenario is a list of events, each "from t=A to t=B, on these endpoints, inject these
faults". Times are seconds after the scenario was loaded (``30``, ``"30s"``, ``"2m"``,
``"500ms"``, ``"t=30s"``); an event without ``to`` lasts until the scenario is cleared.
Events select endpoints by name (``endpoint`` / ``endpoints``) or by ``organisation``
(a whole provider down) or ``region``. ``answers: 529`` is shorthand for an
``http_error`` fault with that status. A fault with ``ramp_to`` grows its magnitude
linearly across the event, which is how latency ramps are written. Evaluation is a pure
function of ``now``, so tests drive it with a fake clock.

Example::

    name: outage_demo
    events:
      - {from: 30s, to: 150s, endpoint: anthropic-us-east, answers: 529}
      - {from: 90s, to: 150s, organisation: anthropic, answers: 529}
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_failover.testing.sim.config import SimEndpoint
from agent_failover.testing.sim.faults import Fault, FaultKind

_DURATION = re.compile(r"^\s*(?:t\s*=\s*)?(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """Turn ``30``, ``"30s"``, ``"2m"``, ``"500ms"`` or ``"t=30s"`` into seconds."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"duration must be >= 0, got {value}")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _UNIT_S[m.group(2)]
    raise ValueError(f"not a duration: {value!r} (use 30, '30s', '2m', '500ms')")


class ScenarioEvent(BaseModel):
    """One timeline entry: a window of time, a set of endpoints, the faults to inject."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    start_s: float = Field(default=0.0, alias="from", ge=0.0)
    end_s: float | None = Field(default=None, alias="to")
    endpoints: list[str] = Field(default_factory=list)
    organisation: str | None = None
    region: str | None = None
    faults: list[Fault] = Field(default_factory=list)
    note: str = ""

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "endpoint" in data:
            data["endpoints"] = [data.pop("endpoint"), *data.get("endpoints", [])]
        if "answers" in data:
            status = int(data.pop("answers"))
            faults = list(data.get("faults", []))
            faults.insert(0, {"kind": FaultKind.HTTP_ERROR.value, "status": status})
            data["faults"] = faults
        for key in ("from", "to", "start_s", "end_s"):
            if data.get(key) is not None:
                data[key] = parse_duration(data[key])
        return data

    @model_validator(mode="after")
    def _window(self) -> ScenarioEvent:
        if not self.faults:
            raise ValueError("an event needs at least one fault (or 'answers: STATUS')")
        if self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(f"'to' ({self.end_s}s) must be after 'from' ({self.start_s}s)")
        if not (self.endpoints or self.organisation or self.region):
            raise ValueError("an event must select 'endpoint(s)', 'organisation' or 'region'")
        return self

    def selects(self, endpoint: SimEndpoint) -> bool:
        """Whether this event targets ``endpoint`` (all given selectors must match)."""
        if self.endpoints and endpoint.name not in self.endpoints:
            return False
        if self.organisation and endpoint.organisation != self.organisation:
            return False
        return not (self.region and endpoint.region != self.region)

    def active_at(self, t: float) -> bool:
        """Whether the event covers ``t`` seconds after load (start inclusive, end exclusive)."""
        return self.start_s <= t and (self.end_s is None or t < self.end_s)

    def faults_at(self, t: float) -> list[Fault]:
        """The event's faults at offset ``t``, with ``ramp_to`` magnitudes interpolated."""
        if self.end_s is None:
            frac = 0.0
        else:
            frac = min(1.0, max(0.0, (t - self.start_s) / (self.end_s - self.start_s)))
        return [_ramped(f, frac) for f in self.faults]


def _ramped(fault: Fault, frac: float) -> Fault:
    if fault.ramp_to is None:
        return fault
    field = {
        FaultKind.LATENCY: "seconds",
        FaultKind.SLOW_FIRST_TOKEN: "seconds",
        FaultKind.STREAM_STALL: "seconds",
        FaultKind.LOGNORMAL_LATENCY: "median_s",
        FaultKind.TOKENS_PER_SEC: "rate",
    }.get(fault.kind)
    if field is None:
        return fault
    start = getattr(fault, field) or 0.0
    value = start + (fault.ramp_to - start) * frac
    if field in ("median_s", "rate"):
        # both must stay strictly positive
        value = max(value, 1e-6)
    return fault.model_copy(update={field: value})


class Scenario(BaseModel):
    """A named fault timeline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "scenario"
    description: str = ""
    events: list[ScenarioEvent] = Field(min_length=1)

    @property
    def duration_s(self) -> float | None:
        """When the last event ends; ``None`` if some event never ends."""
        ends = [e.end_s for e in self.events]
        if any(e is None for e in ends):
            return None
        return max((e for e in ends if e is not None), default=0.0)

    def check_endpoints(self, known: list[str]) -> None:
        """Reject events naming endpoints the simulator does not host."""
        for i, ev in enumerate(self.events):
            unknown = [n for n in ev.endpoints if n not in known]
            if unknown:
                raise ValueError(f"events[{i}]: unknown endpoint(s) {unknown}; known: {known}")


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML (or JSON) file."""
    with Path(path).open(encoding="utf-8") as fh:
        return Scenario.model_validate(yaml.safe_load(fh))


class ActiveScenario:
    """A scenario pinned to the moment it was loaded."""

    def __init__(self, scenario: Scenario, loaded_at: float) -> None:
        self.scenario = scenario
        self.loaded_at = loaded_at

    def elapsed(self, now: float) -> float:
        """Seconds since load."""
        return now - self.loaded_at

    def faults_for(self, endpoint: SimEndpoint, now: float) -> list[Fault]:
        """Faults the timeline injects on ``endpoint`` at ``now``."""
        t = self.elapsed(now)
        out: list[Fault] = []
        for ev in self.scenario.events:
            if ev.active_at(t) and ev.selects(endpoint):
                out.extend(ev.faults_at(t))
        return out

    def status(self, now: float) -> dict[str, Any]:
        """A JSON-able view: elapsed time and which events are active."""
        t = self.elapsed(now)
        return {
            "name": self.scenario.name,
            "loaded_at": self.loaded_at,
            "elapsed_s": t,
            "duration_s": self.scenario.duration_s,
            "active_events": [i for i, ev in enumerate(self.scenario.events) if ev.active_at(t)],
        }
