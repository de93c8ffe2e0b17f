"""Recorded incidents: cassettes, the recorder the chaos proxy uses, and their replay.

``failover chaos-proxy --record DIR`` (and ``failover drill --record DIR``) write a
cassette (:mod:`.cassette`, redacted by :mod:`.record`); :func:`start_replay` serves one
as a provider on loopback with its timing (:mod:`.server`); :mod:`.report` holds the
replay's load and report; ``failover replay DIR --policy P`` runs it all.
"""

from __future__ import annotations

from agent_failover.testing.replay.cassette import (
    Cassette,
    CassetteError,
    Exchange,
    load_cassette,
)
from agent_failover.testing.replay.record import Recorder
from agent_failover.testing.replay.server import ReplayClockTransport, RunningReplay, start_replay

__all__ = [
    "Cassette",
    "CassetteError",
    "Exchange",
    "Recorder",
    "ReplayClockTransport",
    "RunningReplay",
    "load_cassette",
    "start_replay",
]
