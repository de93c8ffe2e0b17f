"""Test support for agent-failover users and for this project's own suites.

Needs the ``testing`` extra (``pip install 'agent-failover[testing]'``): the provider
simulator (an aiohttp server on loopback speaking the Anthropic, OpenAI and Gemini wire
formats with scripted faults), the embedded Temporal dev server and time-skipping test
server from pip packages, and a one-call test worker.

Typical use in a user's test::

    sim = await start_simulator(port=0)            # faults via SimAdmin(sim.url)
    env = await start_time_skipping()              # or start_dev_server(ui=False)
    harness, workers = build_harness(env.client, policy)
    async with running(workers):
        ...
"""

from __future__ import annotations

import importlib
from typing import Any

# Names load on first use (PEP 562): workflow code imports agent_failover.testing.workflows
# inside Temporal's sandbox, which must not pull the simulator server or the harness in.
_EXPORTS = {
    "CallInput": "agent_failover.testing.workflows",
    "ResilientCallWorkflow": "agent_failover.testing.workflows",
    "RepeatedCallInput": "agent_failover.testing.workflows",
    "RepeatedCallWorkflow": "agent_failover.testing.workflows",
    "Harness": "agent_failover.testing.harness",
    "build_harness": "agent_failover.testing.harness",
    "make_harness": "agent_failover.testing.harness",
    "running": "agent_failover.testing.harness",
    "with_test_roles": "agent_failover.testing.roles",
    "start_dev_server": "agent_failover.testing.servers",
    "start_time_skipping": "agent_failover.testing.servers",
    "temporal_cli_path": "agent_failover.testing.servers",
    "temporal_test_server_path": "agent_failover.testing.servers",
    "ActivityRow": "agent_failover.testing.history",
    "activity_rows": "agent_failover.testing.history",
    "format_rows": "agent_failover.testing.history",
    "context_reads": "agent_failover.testing.history",
    "FaultTransport": "agent_failover.testing.fault_transport",
    "activity_clock": "agent_failover.testing.fault_transport",
    "DrillFile": "agent_failover.testing.drill",
    "load_drill": "agent_failover.testing.drill",
    "Cassette": "agent_failover.testing.replay",
    "load_cassette": "agent_failover.testing.replay",
    "start_replay": "agent_failover.testing.replay",
    "RunningReplay": "agent_failover.testing.replay",
    "ReplayClockTransport": "agent_failover.testing.replay",
    "Fault": "agent_failover.testing.sim",
    "FaultKind": "agent_failover.testing.sim",
    "RunningSimulator": "agent_failover.testing.sim",
    "SimAdmin": "agent_failover.testing.sim",
    "load_scenario": "agent_failover.testing.sim",
    "start_simulator": "agent_failover.testing.sim",
    "NoEscalationError": "agent_failover.testing.escalations",
    "wait_for_escalation": "agent_failover.testing.escalations",
}


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'agent_failover.testing' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ActivityRow",
    "CallInput",
    "Cassette",
    "DrillFile",
    "Fault",
    "FaultKind",
    "FaultTransport",
    "Harness",
    "RepeatedCallInput",
    "RepeatedCallWorkflow",
    "ReplayClockTransport",
    "ResilientCallWorkflow",
    "RunningReplay",
    "RunningSimulator",
    "SimAdmin",
    "activity_clock",
    "activity_rows",
    "build_harness",
    "context_reads",
    "format_rows",
    "load_cassette",
    "load_drill",
    "load_scenario",
    "make_harness",
    "running",
    "start_dev_server",
    "start_replay",
    "start_simulator",
    "start_time_skipping",
    "temporal_cli_path",
    "temporal_test_server_path",
    "with_test_roles",
]
