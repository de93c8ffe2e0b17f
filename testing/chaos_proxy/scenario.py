"""The chaos proxy's timeline: simulator scenarios, with selectors that fit real traffic.

A proxy scenario is a simulator scenario (:mod:`agent_failover.testing.sim.scenario`:
the same ``events``, durations, ``answers: STATUS`` shorthand and :class:`Fault`
values), so ``bench/scenarios/*.yaml`` drill files load as they are (their ``drill:``
section is ignored). An event picks requests by any of:

* ``endpoint`` / ``endpoints``: the name the proxy was given (``--endpoint``), or the
  first path segment (a proxy in front of a gateway, or the simulator, hosting several);
* ``organisation`` / ``region``: the proxy's ``--organisation`` / ``--region``;
* ``path``: a glob on the request path (``/v1/messages``, ``*:streamGenerateContent``);
* ``provider``: the wire format the request speaks (detected from the path, or
  ``--provider``): anthropic, openai, gemini, bedrock, azure, vertex;
* ``model``: the model named in the body (or the path, for Gemini, Bedrock, Azure).

Every selector an event gives must match. Evaluation is a pure function of ``now`` and
the request, so tests drive it with a fake clock. What the proxy may print goes
through :func:`redact_headers` and :func:`redact_target` (from :mod:`providers.redact`,
shared with the worker's log filter), which hide credentials.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from agent_failover.providers.redact import (  # noqa: F401  (re-exported: what may be printed)
    REDACTED,
    SECRET_NAMES,
    is_secret,
    redact_headers,
    redact_target,
)
from agent_failover.resilience.endpoint import Cloud, ProviderKind
from agent_failover.testing.sim.faults import OUTPUT_KINDS, Fault, FaultKind
from agent_failover.testing.sim.scenario import Scenario, ScenarioEvent
from agent_failover.testing.sim.wire import CLOUD_WIRES, WIRES, Operation, WireFormat

ProviderName = Literal["anthropic", "openai", "gemini", "bedrock", "azure", "vertex"]
#: Detection order: the cloud paths are the most specific, then the vendors' own APIs.
PROXY_WIRES: dict[str, WireFormat] = {
    "azure": CLOUD_WIRES[Cloud.AZURE],
    "vertex": CLOUD_WIRES[Cloud.GCP],
    "bedrock": WIRES[ProviderKind.BEDROCK],
    "anthropic": WIRES[ProviderKind.ANTHROPIC],
    "openai": WIRES[ProviderKind.OPENAI],
    "gemini": WIRES[ProviderKind.GEMINI],
}
#: Faults that need the request parsed as the simulator parses it (JSON mode, or a reply
#: whose content the simulator writes): see :mod:`.substitute`.
CONTENT_KINDS = frozenset(OUTPUT_KINDS | {FaultKind.CONTENT_FILTER})
_STREAM_VARIANTS = {"converse-stream", "invoke-with-response-stream"}


class ProxyEvent(ScenarioEvent):
    """A simulator event plus the selectors real traffic offers (path, provider, model)."""

    path: str | None = Field(default=None, description="glob on the request path")
    provider: ProviderName | None = None
    model: str | None = None

    @model_validator(mode="after")
    def _window(self) -> ProxyEvent:
        if not self.faults:
            raise ValueError("an event needs at least one fault (or 'answers: STATUS')")
        if self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(f"'to' ({self.end_s}s) must be after 'from' ({self.start_s}s)")
        selectors = (self.endpoints, self.organisation, self.region)
        if not any((*selectors, self.path, self.provider, self.model)):
            raise ValueError(
                "an event must select 'endpoint(s)', 'organisation', 'region', 'path', "
                "'provider' or 'model'"
            )
        return self

    def matches(self, req: RequestInfo, identity: ProxyIdentity) -> bool:
        """Whether this event targets ``req`` (every selector given must match)."""
        if self.endpoints and not (set(self.endpoints) & identity.names_for(req.path)):
            return False
        if self.organisation and identity.organisation != self.organisation:
            return False
        if self.region and identity.region != self.region:
            return False
        if self.path and not fnmatch.fnmatchcase(req.path, self.path):
            return False
        if self.provider and req.provider != self.provider:
            return False
        return not (self.model and req.model != self.model)


class ProxyScenario(Scenario):
    """A named fault timeline for the chaos proxy."""

    events: list[ProxyEvent] = Field(min_length=1)  # type: ignore[assignment]


def pass_through_scenario() -> ProxyScenario:
    """A timeline without any fault: a recording proxy run without ``--scenario``."""
    return ProxyScenario.model_construct(name="pass-through", description="", events=[])


def load_proxy_scenario(path: str | Path) -> ProxyScenario:
    """Read a scenario or drill file; errors name the file and the field."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{p}: cannot read scenario: {exc}") from exc
    if isinstance(raw, dict):
        raw = {k: v for k, v in raw.items() if k != "drill"}
    try:
        return ProxyScenario.model_validate(raw)
    except ValidationError as exc:
        lines = [
            f"{'.'.join(str(x) for x in e['loc']) or 'file'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors(include_url=False)
        ]
        raise ValueError(f"{p}: " + "\n".join(lines)) from None


@dataclass(frozen=True)
class ProxyIdentity:
    """What the upstream is, for ``endpoint`` / ``organisation`` / ``region`` selectors."""

    endpoint: str | None = None
    organisation: str | None = None
    region: str | None = None

    def names_for(self, path: str) -> set[str]:
        """The endpoint names a request answers to: ours and its first path segment."""
        first = path.lstrip("/").split("/", 1)[0]
        return {n for n in (self.endpoint, first) if n}


@dataclass
class RequestInfo:
    """What the proxy knows about one request before forwarding it."""

    method: str
    path: str
    provider: str | None = None
    wire: WireFormat | None = None
    op: Operation | None = None
    model: str = ""
    stream: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _tails(path: str) -> list[str]:
    tail = path.lstrip("/")
    parts = tail.split("/", 1)
    return [tail, parts[1]] if len(parts) == 2 else [tail]


def detect_wire(
    method: str, path: str, query: Mapping[str, str], provider: str | None = None
) -> tuple[str | None, WireFormat | None, Operation | None]:
    """The provider, wire and operation of a request (``provider`` forces the wire)."""
    candidates = {provider: PROXY_WIRES[provider]} if provider else PROXY_WIRES
    q = dict(query)
    for tail in _tails(path):
        for name, wire in candidates.items():
            op = wire.route(method, tail, q)
            if op is not None:
                return name, wire.for_operation(op), op
    if provider:
        return provider, PROXY_WIRES[provider], None
    return None, None, None


def describe_request(
    method: str, path: str, query: Mapping[str, str], body: bytes, provider: str | None = None
) -> RequestInfo:
    """Provider, model and streaming of a request, from its path and (JSON) body."""
    name, wire, op = detect_wire(method, path, query, provider)
    doc: Any = None
    if body.lstrip()[:1] == b"{":
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
    doc = doc if isinstance(doc, dict) else {}
    model = (op.path_model if op else None) or doc.get("model") or ""
    if op is not None and op.path_stream is not None:
        stream = bool(op.path_stream and op.sse)
    elif op is not None and op.variant in _STREAM_VARIANTS:
        stream = True
    else:
        stream = doc.get("stream") is True
    return RequestInfo(method, path, name, wire, op, str(model), stream)


@dataclass
class Timeline:
    """A proxy scenario pinned to a start time on some clock (restartable)."""

    scenario: ProxyScenario
    identity: ProxyIdentity
    started_at: float

    def restart(self, now: float, offset_s: float = 0.0) -> None:
        """Make ``now`` be ``offset_s`` seconds into the timeline."""
        self.started_at = now - offset_s

    def elapsed(self, now: float) -> float:
        """Seconds into the timeline (negative before a future ``--start-at``)."""
        return now - self.started_at

    def faults_for(self, req: RequestInfo, now: float) -> list[Fault]:
        """The faults the timeline injects on ``req`` at ``now``, ramps interpolated."""
        t = self.elapsed(now)
        out: list[Fault] = []
        for ev in self.scenario.events:
            if ev.active_at(t) and ev.matches(req, self.identity):
                out.extend(ev.faults_at(t))
        return out

    def phase(self, t: float) -> str:
        """``before`` the first event, ``fault`` inside one, ``between``, ``after`` the last."""
        events = self.scenario.events
        if any(ev.active_at(t) for ev in events):
            return "fault"
        if t < min(ev.start_s for ev in events):
            return "before"
        ends = [ev.end_s for ev in events]
        if all(e is not None and e <= t for e in ends):
            return "after"
        return "between"

    def next_change_s(self, t: float) -> float | None:
        """Seconds until the next event starts or ends (None: nothing left to change)."""
        edges = [ev.start_s for ev in self.scenario.events]
        edges += [ev.end_s for ev in self.scenario.events if ev.end_s is not None]
        ahead = [e - t for e in edges if e > t]
        return round(min(ahead), 3) if ahead else None

    def status(self, now: float) -> dict[str, Any]:
        """A JSON-able view: elapsed time, phase, the active events and what they inject."""
        t = self.elapsed(now)
        return {
            "scenario": self.scenario.name,
            "started_at": self.started_at,
            "elapsed_s": round(t, 3),
            "phase": self.phase(t),
            "next_change_in_s": self.next_change_s(t),
            "duration_s": self.scenario.duration_s,
            "active_events": [
                {
                    "index": i,
                    "note": ev.note,
                    "faults": [f.label for f in ev.faults],
                    "from_s": ev.start_s,
                    "to_s": ev.end_s,
                }
                for i, ev in enumerate(self.scenario.events)
                if ev.active_at(t)
            ],
        }
