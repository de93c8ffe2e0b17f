"""The simulator's mutable state: faults per endpoint, the loaded scenario, the attempts log.

One :class:`SimState` per running simulator, shared by the HTTP handlers and the admin
API. It owns the seeded RNG (fault probabilities, latency draws) so a run is
reproducible, the clock every timestamp comes from, the count of in-flight attempts (so
tests can await "no handler left" instead of sleeping) and the shutdown event that
releases requests held open on purpose.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from agent_failover.testing.sim.clock import Clock, SystemClock
from agent_failover.testing.sim.config import AccuracySettings, SimConfig, SimEndpoint
from agent_failover.testing.sim.faults import Fault
from agent_failover.testing.sim.oauth import OAuthState
from agent_failover.testing.sim.scenario import ActiveScenario, Scenario
from agent_failover.testing.sim.tools import ToolState

#: Characters of a request's system prompt kept in the attempts log.
SYSTEM_LOG_CHARS = 2_000


class AttemptOutcome(StrEnum):
    """How an attempt ended, from the server's side."""

    PENDING = "pending"  # still being answered
    OK = "ok"  # a complete reply (possibly with an output fault inside)
    ERROR = "error"  # an HTTP error answer
    RESET = "reset"  # connection reset before headers
    STREAM_CUT = "stream_cut"  # connection closed mid-body / mid-stream
    STREAM_ERROR_EVENT = "stream_error_event"  # error event inside a 200 stream
    NO_DONE = "no_done"  # final chunk sent, terminal marker withheld
    CLIENT_DISCONNECTED = "client_disconnected"  # the client gave up first
    SERVER_SHUTDOWN = "server_shutdown"  # released by the simulator stopping


@dataclass
class AttemptLogEntry:
    """One request the simulator received on a completion route."""

    seq: int
    endpoint: str
    arrival: float
    model: str | None = None
    stream: bool = False
    faults: list[str] = field(default_factory=list)
    outcome: AttemptOutcome = AttemptOutcome.PENDING
    status: int | None = None
    tokens_sent: int = 0
    input_tokens: int = 0
    duration_s: float | None = None
    request_id: str = ""
    #: The request's system prompt (its first SYSTEM_LOG_CHARS characters), so tests can
    #: see which prompt variant a route was sent.
    system: str = ""
    #: The JSON schema came on the wire (response_format / responseSchema / forced tool)
    #: rather than in the prompt text.
    native_schema: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form used by the admin API."""
        d = asdict(self)
        d["outcome"] = self.outcome.value
        return d


class SimState:
    """Everything the handlers and the admin API share."""

    def __init__(self, config: SimConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.endpoints: dict[str, SimEndpoint] = {e.name: e for e in config.endpoints}
        self.rng = random.Random(config.seed)
        self.faults: dict[str, list[Fault]] = {name: [] for name in self.endpoints}
        self.scenario: ActiveScenario | None = None
        self.attempts: deque[AttemptLogEntry] = deque(maxlen=config.max_attempts_logged)
        self._seq = 0
        self._inflight = 0
        self._inflight_by: dict[str, int] = {name: 0 for name in self.endpoints}
        self.accuracy: dict[str, AccuracySettings] = {
            e.name: e.accuracy_settings for e in config.endpoints
        }
        self._idle = asyncio.Event()
        self._idle.set()
        self._busy = asyncio.Event()
        self.shutdown = asyncio.Event()
        self.started_at = self.clock.now()
        self.tools = ToolState()
        self.oauth = OAuthState()

    # faults -----------------------------------------------------------------
    def set_faults(self, endpoint: str, faults: list[Fault]) -> None:
        """Replace the runtime faults of one endpoint."""
        self._require(endpoint)
        self.faults[endpoint] = list(faults)

    def clear_faults(self, endpoint: str | None = None) -> None:
        """Clear one endpoint's runtime faults, or every fault and the scenario."""
        if endpoint is None:
            self.faults = {name: [] for name in self.endpoints}
            self.scenario = None
            return
        self._require(endpoint)
        self.faults[endpoint] = []

    def load_scenario(self, scenario: Scenario) -> ActiveScenario:
        """Start ``scenario``'s timeline now (replacing any loaded one)."""
        scenario.check_endpoints(list(self.endpoints))
        self.scenario = ActiveScenario(scenario, self.clock.now())
        return self.scenario

    def active_faults(self, endpoint: str) -> list[Fault]:
        """Runtime faults first, then whatever the timeline injects right now."""
        ep = self._require(endpoint)
        out = list(self.faults[endpoint])
        if self.scenario is not None:
            out.extend(self.scenario.faults_for(ep, self.clock.now()))
        return out

    # attempts -----------------------------------------------------------------
    def begin_attempt(self, endpoint: str) -> AttemptLogEntry:
        """Log a new attempt (outcome pending) and count it in flight."""
        self._seq += 1
        entry = AttemptLogEntry(seq=self._seq, endpoint=endpoint, arrival=self.clock.now())
        self.attempts.append(entry)
        self._inflight += 1
        self._inflight_by[endpoint] = self._inflight_by.get(endpoint, 0) + 1
        self._idle.clear()
        self._busy.set()
        return entry

    def end_attempt(self, entry: AttemptLogEntry) -> None:
        """Stamp the duration and release the in-flight slot."""
        entry.duration_s = max(0.0, self.clock.now() - entry.arrival)
        self._inflight -= 1
        self._inflight_by[entry.endpoint] -= 1
        if self._inflight == 0:
            self._idle.set()
            self._busy.clear()

    @property
    def inflight(self) -> int:
        """Attempts currently being answered (or held)."""
        return self._inflight

    def inflight_on(self, endpoint: str) -> int:
        """Attempts currently in flight on one endpoint."""
        return self._inflight_by.get(endpoint, 0)

    # golden-set accuracy -----------------------------------------------------------
    def set_accuracy(self, endpoint: str, settings: AccuracySettings) -> None:
        """Replace one endpoint's golden-set accuracy at run time."""
        self._require(endpoint)
        self.accuracy[endpoint] = settings

    def reset_accuracy(self, endpoint: str | None = None) -> None:
        """Back to the configured accuracy (one endpoint, or all)."""
        names = [endpoint] if endpoint is not None else list(self.endpoints)
        for name in names:
            self.accuracy[name] = self._require(name).accuracy_settings

    async def wait_idle(self) -> None:
        """Return once no attempt is in flight (tests await this instead of sleeping)."""
        await self._idle.wait()

    async def wait_busy(self) -> None:
        """Return once at least one attempt is in flight (e.g. a request being held)."""
        await self._busy.wait()

    def list_attempts(
        self, endpoint: str | None = None, since: float | None = None, after_seq: int | None = None
    ) -> list[AttemptLogEntry]:
        """Attempts filtered by endpoint, arrival time (>= since) and sequence (> after_seq)."""
        return [
            a
            for a in self.attempts
            if (endpoint is None or a.endpoint == endpoint)
            and (since is None or a.arrival >= since)
            and (after_seq is None or a.seq > after_seq)
        ]

    def clear_attempts(self) -> None:
        """Forget the attempts log (sequence numbers keep growing)."""
        self.attempts.clear()

    def reset(self) -> None:
        """Back to start-up state: no faults, no scenario, empty logs, reseeded RNG, no tools."""
        self.clear_faults()
        self.reset_accuracy()
        self.tools.reset()
        self.oauth.reset()
        self.attempts.clear()
        self._seq = 0
        self.rng = random.Random(self.config.seed)

    def _require(self, endpoint: str) -> SimEndpoint:
        try:
            return self.endpoints[endpoint]
        except KeyError:
            raise KeyError(
                f"unknown endpoint {endpoint!r}; known: {list(self.endpoints)}"
            ) from None
