"""``failover sim fault ROUTE KIND [--for 30s]`` and ``failover sim clear``: the simulator's
admin API without hand-written curl calls.

ROUTE is a simulator endpoint (``anthropic-us-east``), ``all``, or a route of the user's policy
(``FAILOVER_POLICY`` or ``--policy``) whose ``base_url`` points at the simulator: the
route ``claude-us`` with ``base_url: http://127.0.0.1:8400/anthropic-us-east`` is the
simulator endpoint ``anthropic-us-east``. The simulator is found at ``--sim-url``, else
``SIM_URL``, else the running ``failover dev`` stack's, else ``http://127.0.0.1:8400``.

A fault without ``--for`` stays until ``failover sim clear``; with ``--for`` it is a
one-event timeline the simulator ends on its own (it replaces a loaded scenario). Dev
commands only: this module loads the simulator's client when it runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError

DEFAULT_SIM_URL = "http://127.0.0.1:8400"


def sim_url_for(url: str | None) -> str:
    """--sim-url, else SIM_URL, else the running dev stack's simulator, else the default."""
    if url:
        return url.rstrip("/")
    if os.environ.get("SIM_URL"):
        return os.environ["SIM_URL"].rstrip("/")
    from agent_failover.cli.stackfile import read_stack_file

    stack = read_stack_file() or {}
    return (stack.get("sim_url") or DEFAULT_SIM_URL).rstrip("/")


@dataclass(frozen=True)
class FaultSpec:
    """What the operator asked for, before it is checked against the simulator."""

    route: str
    kind: str
    for_s: float | None = None
    seconds: float | None = None
    status: int | None = None
    probability: float = 1.0


def build_fault(spec: FaultSpec) -> dict[str, Any]:
    """The fault as the admin API takes it, or exit 2 naming the kinds / the missing value."""
    from pydantic import ValidationError

    from agent_failover.cli.errors import validation_lines
    from agent_failover.testing.sim.faults import Fault, FaultKind

    kinds = [k.value for k in FaultKind]
    if spec.kind not in kinds:
        raise CliError(
            f"unknown fault kind {spec.kind!r}; kinds: {', '.join(kinds)}", EXIT_BAD_INPUT
        )
    raw = {"kind": spec.kind, "probability": spec.probability}
    raw |= {k: v for k, v in (("seconds", spec.seconds), ("status", spec.status)) if v is not None}
    try:
        fault = Fault.model_validate(raw)
    except ValidationError as exc:
        line = "; ".join(validation_lines(exc))
        hint = " (pass --seconds N)" if "seconds" in line else ""
        hint += " (pass --status N)" if "status" in line else ""
        raise CliError(f"fault {spec.kind}: {line}{hint}", EXIT_BAD_INPUT) from None
    return fault.model_dump(mode="json", exclude_none=True)


def policy_routes(policy: Path | None, sim_url: str) -> dict[str, str]:
    """Route name -> simulator endpoint for the routes of the user's policy that point at
    the simulator (``{}`` when no policy is named)."""
    path = policy or os.environ.get("FAILOVER_POLICY")
    if not path:
        return {}
    from agent_failover.cli.policyfile import load_policy_for_cli

    env = {**os.environ, "SIM_URL": os.environ.get("SIM_URL", sim_url)}
    pol = load_policy_for_cli(path, env)
    sim = urlsplit(sim_url)
    out = {}
    for name, ep in pol.endpoints.items():
        url = urlsplit(str(ep.base_url or ""))
        if (url.hostname, url.port) == (sim.hostname, sim.port):
            first = url.path.strip("/").split("/", 1)[0]
            if first:
                out[name] = first
    return out


async def _endpoint_names(admin: Any, url: str) -> list[str]:
    import httpx

    try:
        return sorted(e["name"] for e in await admin.endpoints())
    except httpx.HTTPError:
        raise CliError(
            f"cannot reach the simulator at {url}: start it with `failover sim` (or "
            "`failover dev`), or pass --sim-url / set SIM_URL"
        ) from None


async def resolve_endpoints(admin: Any, url: str, route: str, policy: Path | None) -> list[str]:
    """The simulator endpoints ROUTE names (``all``: every one), or an error listing what
    it could be."""
    known = await _endpoint_names(admin, url)
    if route == "all":
        return known
    if route in known:
        return [route]
    mapped = policy_routes(policy, url)
    if mapped.get(route) in known:
        return [mapped[route]]
    yours = f"; your policy's routes on it: {', '.join(sorted(mapped))}" if mapped else ""
    raise CliError(
        f"no simulator endpoint or policy route {route!r} at {url}; endpoints: "
        f"{', '.join(known)}{yours}",
        EXIT_BAD_INPUT,
    )


async def inject(spec: FaultSpec, url: str, policy: Path | None) -> str:
    """Set the fault (for ``spec.for_s`` seconds, or until cleared); the line to print."""
    from agent_failover.testing.sim.admin import SimAdmin

    fault = build_fault(spec)
    async with SimAdmin(url) as admin:
        endpoints = await resolve_endpoints(admin, url, spec.route, policy)
        named = spec.route
        if endpoints != [spec.route]:
            named += f" (simulator {', '.join(endpoints)})"
        if spec.for_s is None:
            for endpoint in endpoints:
                await admin.set_faults(endpoint, [fault])
            return f"{named}: {spec.kind} until `failover sim clear`"
        event = {"from": 0, "to": spec.for_s, "endpoints": endpoints, "faults": [fault]}
        await admin.load_scenario({"name": f"{spec.kind} on {spec.route}", "events": [event]})
        return f"{named}: {spec.kind} for {spec.for_s:g} s"


async def clear(url: str, route: str | None, policy: Path | None) -> str:
    """Clear one endpoint's faults, or every fault and the scenario; the line to print."""
    from agent_failover.testing.sim.admin import SimAdmin

    async with SimAdmin(url) as admin:
        if route is None:
            await _endpoint_names(admin, url)  # reachable?
            await admin.clear()
            return f"cleared every fault and the scenario at {url}"
        for endpoint in await resolve_endpoints(admin, url, route, policy):
            await admin.clear(endpoint)
        return f"{route}: faults cleared"
