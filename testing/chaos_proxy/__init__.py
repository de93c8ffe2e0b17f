"""The chaos proxy: the simulator's fault kinds and timelines injected into real traffic.

``failover chaos-proxy --upstream URL --scenario FILE --port P`` runs
:func:`serve_chaos_proxy`; tests start one in their event loop with
:func:`start_chaos_proxy`. Scenario format and selectors: :mod:`.scenario`; the relay
(pass-through and stream faults): :mod:`.relay`; the server and admin routes: :mod:`.server`.
"""

from __future__ import annotations

from agent_failover.testing.chaos_proxy.scenario import (
    ProxyIdentity,
    ProxyScenario,
    load_proxy_scenario,
    pass_through_scenario,
)
from agent_failover.testing.chaos_proxy.server import (
    RunningChaosProxy,
    serve_chaos_proxy,
    start_chaos_proxy,
)

__all__ = [
    "ProxyIdentity",
    "ProxyScenario",
    "RunningChaosProxy",
    "load_proxy_scenario",
    "pass_through_scenario",
    "serve_chaos_proxy",
    "start_chaos_proxy",
]
