"""A provider simulator: a real HTTP server on loopback speaking the Anthropic, OpenAI and
Gemini wire formats, with fault injection per endpoint and a log of every attempt.

Entry points: :func:`start_simulator` (in-process, for tests and benches),
:func:`run_simulator_blocking` / ``python -m sim`` (foreground), :class:`SimAdmin`
(admin client). Faults are :class:`Fault` values; timelines are scenario YAML files in
``sim/scenarios/``.
"""

from agent_failover.testing.sim.admin import AttemptInfo, SimAdmin
from agent_failover.testing.sim.clock import Clock, FakeClock, SystemClock
from agent_failover.testing.sim.faults import Fault, FaultKind
from agent_failover.testing.sim.scenario import Scenario, load_scenario
from agent_failover.testing.sim.server import (
    RunningSimulator,
    run_simulator_blocking,
    start_simulator,
)

__all__ = [
    "AttemptInfo",
    "Clock",
    "FakeClock",
    "Fault",
    "FaultKind",
    "RunningSimulator",
    "Scenario",
    "SimAdmin",
    "SystemClock",
    "load_scenario",
    "run_simulator_blocking",
    "start_simulator",
]
