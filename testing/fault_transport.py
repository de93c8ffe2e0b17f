"""A fault-injecting httpx transport whose timeline follows the test environment's clock.

The simulator plays a scenario on its own (wall) clock, so a 30-minute outage takes 30
minutes. :class:`FaultTransport` plays the same scenario files on the clock the code
under test sees: inside a Temporal activity that is the activity's ``now`` (the time
the attempt was scheduled, which the time-skipping server moves forward when it skips),
so a workflow that sleeps through half an hour of outage in a time-skipping test meets
exactly the faults the timeline holds at that workflow time, in seconds of real time.

For each request the transport finds the simulator endpoint (the first path segment of
the URL, as the simulator routes), evaluates the timeline at ``clock() - start`` and
forwards the request to the simulator with the active faults in the ``x-sim-faults``
header; the simulator injects them exactly like its own (wire-accurate error bodies,
Retry-After, stream faults, latency — latency is real time: keep it in milliseconds).
Give it to the worker's HTTP client::

    drill = load_drill("bench/scenarios/hard_primary_outage.yaml")  # or any Scenario
    transport = FaultTransport(drill.scenario)
    transport.start((await env.get_current_time()).timestamp())
    http = build_http_client(policy.endpoints.values(), transport=transport)
    harness, workers = build_harness(env.client, policy, http=http)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from temporalio import activity

from agent_failover.testing.sim.config import SimEndpoint, load_sim_config
from agent_failover.testing.sim.handler import FAULTS_HEADER
from agent_failover.testing.sim.scenario import Scenario


def activity_clock() -> float:
    """The test environment's time as the running activity sees it (epoch seconds).

    Inside an activity: when this attempt was scheduled, in the server's (possibly
    skipped) time; outside one (a direct call in a test): the wall clock.
    """
    if not activity.in_activity():
        return time.time()
    return activity.info().current_attempt_scheduled_time.timestamp()


@dataclass(frozen=True)
class Injection:
    """One request the transport saw: when on the timeline, where, and what it injected."""

    t: float
    endpoint: str
    faults: tuple[str, ...]


class FaultTransport(httpx.AsyncBaseTransport):
    """Plays a :class:`Scenario` on ``clock`` and injects its faults into simulator calls."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        clock: Callable[[], float] = activity_clock,
        endpoints: Iterable[SimEndpoint] | None = None,
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.scenario = scenario
        self.clock = clock
        hosted = list(endpoints) if endpoints is not None else load_sim_config().endpoints
        self._endpoints = {e.name: e for e in hosted}
        scenario.check_endpoints(list(self._endpoints))
        self._inner = inner or httpx.AsyncHTTPTransport()
        self._start: float | None = None
        self.injections: list[Injection] = []

    def start(self, at: float) -> None:
        """Pin t=0 of the timeline to ``at`` (epoch seconds on ``clock``)."""
        self._start = at

    def offset(self) -> float:
        """Seconds into the timeline now (on ``clock``); an error before :meth:`start`."""
        if self._start is None:
            raise RuntimeError("FaultTransport.start(at) was not called: the timeline has no t=0")
        return self.clock() - self._start

    def faults_json(self, endpoint: SimEndpoint, t: float) -> list[dict]:
        """The timeline's faults on ``endpoint`` at ``t`` seconds, ramps interpolated."""
        return [
            f.model_dump(mode="json", exclude_none=True)
            for ev in self.scenario.events
            if ev.active_at(t) and ev.selects(endpoint)
            for f in ev.faults_at(t)
        ]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Add the faults of this moment of the timeline, then send to the simulator."""
        name = urlsplit(str(request.url)).path.lstrip("/").split("/", 1)[0]
        endpoint = self._endpoints.get(name)
        if endpoint is not None:
            t = self.offset()
            faults = self.faults_json(endpoint, t)
            labels = tuple(f["kind"] for f in faults)
            self.injections.append(Injection(round(t, 3), name, labels))
            if faults:
                request.headers[FAULTS_HEADER] = json.dumps(faults)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._inner.aclose()
