"""``failover sim``: run the provider simulator; ``sim fault`` / ``sim clear`` steer one.

``failover sim`` alone serves the simulator in the foreground; ``failover sim fault ROUTE
KIND [--for 30s]`` and ``failover sim clear [ROUTE]`` talk to a running one through its
admin API (:mod:`agent_failover.cli.sim_faults`). Dev commands: each loads the simulator's
code inside its body, only when it runs. :mod:`agent_failover.cli.main` registers the group.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError
from agent_failover.cli.shared import console, guard, port_in_use_said
from agent_failover.providers.extras import require_installed

#: What the simulator imports (the ``sim`` extra).
SIM_MODULES = ("aiohttp",)

sim_app = typer.Typer(
    help="Run the provider simulator (Anthropic, OpenAI, Gemini, cloud wire formats) in the "
    "foreground; `sim fault` / `sim clear` inject and clear faults on a running one.",
    invoke_without_command=True,
)
SimUrlOpt = Annotated[
    str | None,
    typer.Option(
        help="The simulator (default: SIM_URL, then the running `failover dev` stack's, "
        "then http://127.0.0.1:8400)."
    ),
]
PolicyOpt = Annotated[
    Path | None,
    typer.Option(help="Your policy, to name ROUTE by its route name (default: FAILOVER_POLICY)."),
]


@sim_app.callback()
def sim(
    ctx: typer.Context,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 = any free port).")] = 8400,
    config: Annotated[Path | None, typer.Option(help="Simulator endpoints YAML.")] = None,
    scenario: Annotated[Path | None, typer.Option(help="Fault timeline YAML to load.")] = None,
) -> None:
    """Run the provider simulator in the foreground (without a subcommand)."""
    if ctx.invoked_subcommand is not None:
        return

    def body() -> None:
        require_installed("`failover sim`", "sim", SIM_MODULES)
        from agent_failover.testing.sim.server import run_simulator_blocking

        with port_in_use_said(port):
            run_simulator_blocking(port, config, scenario)

    guard(body)


def _duration(text: str | None) -> float | None:
    if text is None:
        return None
    from agent_failover.cli.report import parse_since

    try:
        return parse_since(text).total_seconds()
    except ValueError:
        raise CliError(
            f"--for: expected a duration like 30s, 5m or 1h, got {text!r}", EXIT_BAD_INPUT
        ) from None


@sim_app.command("fault")
def fault(
    route: Annotated[
        str, typer.Argument(help="Simulator endpoint, a route of your policy, or all.")
    ],
    kind: Annotated[
        str,
        typer.Argument(
            help="overloaded, server_error, rate_limit, hang, "
            "latency (--seconds), http_error (--status)..."
        ),
    ],
    for_: Annotated[
        str | None,
        typer.Option(
            "--for",
            help="End the fault after this long (30s, 5m); default: until `failover sim clear`.",
        ),
    ] = None,
    seconds: Annotated[float | None, typer.Option(help="latency/hang/stall length.")] = None,
    status: Annotated[int | None, typer.Option(help="http_error: the HTTP status.")] = None,
    probability: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of requests it hits.")
    ] = 1.0,
    sim_url: SimUrlOpt = None,
    policy: PolicyOpt = None,
) -> None:
    """Inject a fault into one simulator endpoint (an outage, a slow region, errors)."""
    from agent_failover.cli.sim_faults import FaultSpec, inject, sim_url_for

    def body() -> None:
        require_installed("`failover sim fault`", "sim", SIM_MODULES)
        spec = FaultSpec(route, kind, _duration(for_), seconds, status, probability)
        console.print(asyncio.run(inject(spec, sim_url_for(sim_url), policy)), highlight=False)

    guard(body)


@sim_app.command("clear")
def clear(
    route: Annotated[
        str | None, typer.Argument(help="Only this endpoint or route (default: everything).")
    ] = None,
    sim_url: SimUrlOpt = None,
    policy: PolicyOpt = None,
) -> None:
    """Clear the faults of one endpoint, or every fault and the loaded scenario."""
    from agent_failover.cli.sim_faults import clear as clear_faults
    from agent_failover.cli.sim_faults import sim_url_for

    def body() -> None:
        require_installed("`failover sim clear`", "sim", SIM_MODULES)
        console.print(asyncio.run(clear_faults(sim_url_for(sim_url), route, policy)),
                      highlight=False)  # fmt: skip

    guard(body)
