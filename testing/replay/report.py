"""What a replay loads and how its report is cut: pure functions over a cassette.

The load is the drill's open-loop schedule (:class:`~agent_failover.testing.drill.
DrillSettings`): from the cassette's mark when ``failover drill --record`` wrote one,
else ``rate_per_s`` estimated as the busiest path's exchanges per second (each request
of a healthy phase reaches the primary once) over the cassette's length. The fault
windows that cut the report into before/fault/after are the mark's, else the spans in
which a route answered with an error, dropped the connection or never answered (failed
exchanges of one route less than :data:`MERGE_GAP_S` apart form one window).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from agent_failover.testing.drill import DrillSettings, Sample, summarise_timeline
from agent_failover.testing.replay.cassette import Cassette, Exchange

#: Failed exchanges of one route closer than this belong to one fault window.
MERGE_GAP_S = 5.0
DEFAULT_RATE_PER_S = 4.0


def _label(route: str, failed: list[Exchange]) -> str:
    kinds = Counter(str(e.response.status) if e.response.status else e.response.end for e in failed)
    return f"{route}: " + ",".join(k for k, _ in kinds.most_common(3))


def infer_fault_events(cassette: Cassette) -> list[tuple[float, float, str]]:
    """Per route, the windows (seconds after the start) where its exchanges failed."""
    by_route: dict[str, list[Exchange]] = defaultdict(list)
    for ex in cassette.exchanges:
        if ex.response.failed and ex.at >= cassette.start:
            by_route[ex.route].append(ex)
    events: list[tuple[float, float, str]] = []
    for route, failed in sorted(by_route.items()):
        group = [failed[0]]
        for ex in failed[1:]:
            if ex.at - group[-1].at > MERGE_GAP_S:
                events.append(_window(cassette, route, group))
                group = []
            group.append(ex)
        events.append(_window(cassette, route, group))
    return sorted(events)


def _window(cassette: Cassette, route: str, group: list[Exchange]) -> tuple[float, float, str]:
    start = round(group[0].at - cassette.start, 3)
    end = round(max(e.at + e.response.end_s for e in group) - cassette.start, 3)
    return (start, max(end, start + 0.001), _label(route, group))


def fault_events(cassette: Cassette) -> list[tuple[float, float, str]]:
    """The mark's fault windows when it has them, else the inferred ones."""
    if cassette.mark is not None and cassette.mark.events:
        return [tuple(e) for e in cassette.mark.events]  # type: ignore[misc]
    return infer_fault_events(cassette)


def estimated_rate(cassette: Cassette) -> float:
    """Exchanges per second on the busiest path, over the cassette (0.1 at least)."""
    span = max(1e-3, cassette.end - cassette.start)
    paths = Counter(e.request.path for e in cassette.exchanges if e.at >= cassette.start)
    if not paths:
        return DEFAULT_RATE_PER_S
    return max(0.1, round(paths.most_common(1)[0][1] / span, 2))


def replay_settings(cassette: Cassette, **overrides: Any) -> DrillSettings:
    """The load for a replay: the mark's settings, else estimated; ``overrides`` (not
    None) win. ``duration_s`` defaults to the cassette's length from its start."""
    base: dict[str, Any] = dict(cassette.mark.load or {}) if cassette.mark is not None else {}
    base.setdefault("rate_per_s", estimated_rate(cassette))
    base.setdefault("duration_s", round(max(1.0, cassette.end - cassette.start), 3))
    base.update({k: v for k, v in overrides.items() if v is not None})
    return DrillSettings.model_validate(base)


def summarise_replay(
    cassette: Cassette,
    settings: DrillSettings,
    samples: list[Sample],
    upstream_arrivals: list[float],
    *,
    unmatched: int = 0,
) -> dict[str, Any]:
    """The drill's report for one replay, plus how many requests the cassette lacked."""
    report = summarise_timeline(
        name=cassette.name,
        description=f"replay of {len(cassette.exchanges)} recorded exchanges",
        settings=settings,
        events=fault_events(cassette),
        samples=samples,
        upstream_arrivals=upstream_arrivals,
    )
    report["unmatched_requests"] = unmatched
    return report
