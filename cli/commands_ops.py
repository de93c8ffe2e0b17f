"""The operator's commands against a running deployment: ``run``, ``status``, ``report``,
``force``, ``resolve`` and ``escalations list|show``.

Each talks to Temporal (and, for ``status --from-store``, Redis) and nothing else: none
of them loads the dev stack or the test helpers, so they behave the same on a laptop and
against production. :mod:`agent_failover.cli.main` registers them on the app.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

import typer

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError
from agent_failover.cli.shared import (
    AddressOpt,
    TaskQueueOpt,
    connect,
    console,
    err,
    guard,
    shown_address,
    task_queue_for,
    task_queue_named,
    temporal_address,
)

#: This module's top-level commands; main lists them in the app's help order.
commands = typer.Typer()
escalations_app = typer.Typer(
    help="Runs waiting for a human: list them, show one (answer with `failover resolve`).",
    no_args_is_help=True,
)


@commands.command("run")
def run(
    task: Annotated[str, typer.Argument(help="What the pipeline should do.")],
    address: AddressOpt = None,
    task_queue: TaskQueueOpt = None,
    no_escalate: Annotated[
        bool, typer.Option("--no-escalate", help="Never pause for a human.")
    ] = False,
    suppress_degraded: Annotated[
        bool, typer.Option(help="Leave degraded sections out of the answer.")
    ] = False,
) -> None:
    """Start a pipeline, show its progress, print the answer and the per-step table."""
    from agent_failover.cli.pipeline_run import build_input, run_pipeline

    inp = guard(lambda: build_input(task, no_escalate, suppress_degraded))
    tq = task_queue_for(task_queue)

    async def body() -> None:
        client = await connect(address)
        await run_pipeline(console, client, inp, tq, temporal_address(address))

    guard(lambda: asyncio.run(body()), address=shown_address(address))


@commands.command("status")
def status(
    address: AddressOpt = None,
    task_queue: TaskQueueOpt = None,
    from_store: Annotated[
        bool,
        typer.Option(
            "--from-store",
            help="Read the shared health store directly instead of asking the health monitor.",
        ),
    ] = False,
    redis_url: Annotated[
        str | None,
        typer.Option(
            help="The shared store (default REDIS_URL, the dev stack's, then the one the "
            "monitor's table names)."
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(help="Its key namespace (default: the worker's, FAILOVER_REDIS_NAMESPACE)."),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            help="With --from-store: the policy whose routes to list "
            "(default FAILOVER_POLICY, as the worker's)."
        ),
    ] = None,
    window_s: Annotated[float, typer.Option(help="With --from-store: rolling window.")] = 60.0,
) -> None:
    """Route health: breakers (live from the shared store), latency, errors, budgets.

    The table: breaker state, p50/p95/p99 (ms), error rate, last probe and its age,
    context windows, and whether the shared store is degraded; then the rate budgets
    (requests and tokens left per endpoint and bulkhead, shared by every worker) and, for
    roles with shadow evaluation, each route's quality verdict.

    By default it asks the deployment's health monitor (only Temporal access needed) for
    the table of its last probe round, and re-reads the breakers from the shared store
    when it is reachable from here (the line above the table says which, and how old the
    rest is). It answers within seconds when no worker runs, and says so when the
    monitor is not running, naming the task queue it looked for.
    """
    from agent_failover.cli.health import show_monitor_status, table_from_store
    from agent_failover.cli.ops import monitor_task_queue
    from agent_failover.cli.render import health_table, status_extras

    async def body() -> None:
        if from_store:
            table = await table_from_store(redis_url, namespace, policy, window_s)
            console.print(health_table(table))
            for extra in status_extras(table, now=table.taken_at):
                console.print(extra)
            return
        client = await connect(address)
        tq = await monitor_task_queue(client, *task_queue_named(task_queue))
        await show_monitor_status(console, client, tq, redis_url, namespace)

    guard(lambda: asyncio.run(body()), address=shown_address(address))


@commands.command("report")
def report(
    since: Annotated[
        str, typer.Option(help="Window: runs started in the last 30m, 1h, 2d...")
    ] = "1h",
    address: AddressOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="Runs read at most (newest first).")] = 500,
    task_queue: Annotated[
        str | None,
        typer.Option("--task-queue", help="Only runs of this task queue (default: all)."),
    ] = None,
    metrics_url: Annotated[
        str | None,
        typer.Option(
            help="A worker's scrape endpoint (http://host:9464/metrics): adds breaker "
            "states and times to restoration."
        ),
    ] = None,
) -> None:
    """The dashboard's figures as tables: degraded-mode rate, substitutions, cascade depth
    and validation pass rate by role; attempts, p50/p95/p99 and TTFT by route; escalations
    and side effects.

    Reads every run of the window from Temporal that called `resilient_complete` (your own
    workflows too: their calls come from their histories) or carries the failover search
    attributes.
    """
    from agent_failover.cli.report import build_report, parse_since, report_tables
    from agent_failover.cli.report_fetch import fetch_breakers, fetch_runs

    async def body() -> None:
        try:
            window = parse_since(since)
        except ValueError as exc:
            raise CliError(str(exc), EXIT_BAD_INPUT) from None
        client = await connect(address)
        runs, truncated = await fetch_runs(client, window, limit, task_queue)
        for table in report_tables(build_report(runs), since):
            console.print(table)
        if truncated:
            console.print(f"(the newest {limit} runs only: raise --limit for more)")
        if metrics_url:
            from rich.table import Table

            breakers = Table(title=f"breakers ({metrics_url})")
            for col in ("route", "state", "mean time to restoration"):
                breakers.add_column(col)
            for row in await fetch_breakers(metrics_url):
                breakers.add_row(*row)
            console.print(breakers)

    guard(lambda: asyncio.run(body()), address=shown_address(address))


@commands.command("force")
def force(
    route: Annotated[str, typer.Argument(help="Route (endpoint name).")],
    state_: Annotated[str, typer.Argument(metavar="STATE", help="open, closed or release.")],
    address: AddressOpt = None,
    task_queue: TaskQueueOpt = None,
) -> None:
    """Operator override of a route's breaker, through the health monitor (an unknown
    route is refused with the known names)."""
    from agent_failover.cli.ops import override_route
    from agent_failover.resilience.contracts import BreakerState

    mapping = {
        "open": BreakerState.FORCED_OPEN,
        "closed": BreakerState.FORCED_CLOSED,
        "release": None,
    }
    if state_ not in mapping:
        err.print(f"error: state must be open, closed or release, not {state_!r}", markup=False)
        raise typer.Exit(EXIT_BAD_INPUT)

    async def body() -> None:
        from agent_failover.cli.ops import monitor_task_queue

        client = await connect(address)
        tq = await monitor_task_queue(client, *task_queue_named(task_queue))
        done = await override_route(client, tq, route, mapping[state_])
        change = "unchanged" if not done.changed else f"{done.from_state.value} →"
        console.print(f"{route}: {change} {done.to_state.value}", highlight=False)

    guard(lambda: asyncio.run(body()), address=shown_address(address))


@commands.command("resolve")
def resolve(
    workflow_id: Annotated[str, typer.Argument(help="The paused run's workflow id.")],
    action: Annotated[str, typer.Argument(help="retry, accept_degraded, provide_output or abort.")],
    output: Annotated[str | None, typer.Option(help="The answer, for provide_output.")] = None,
    operator: Annotated[str, typer.Option(help="Who decided (audit).")] = os.environ.get(
        "USER", "operator"
    ),
    note: Annotated[str, typer.Option(help="Why (audit).")] = "",
    address: AddressOpt = None,
) -> None:
    """Resolve a run paused for a human (a pipeline, or any workflow that calls escalate());
    refused unless it is waiting."""
    from pydantic import ValidationError

    from agent_failover.cli.errors import validation_lines
    from agent_failover.cli.ops import resolve_escalation
    from agent_failover.workflows.models import EscalationDecision

    try:
        decision = EscalationDecision(action=action, output=output, operator=operator, note=note)
    except ValidationError as exc:
        err.print("\n".join(f"error: {ln}" for ln in validation_lines(exc)), markup=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if decision.action.value == "provide_output" and not decision.output:
        err.print("error: provide_output needs --output TEXT", markup=False)
        raise typer.Exit(EXIT_BAD_INPUT)

    async def body() -> None:
        client = await connect(address)
        receipt = await resolve_escalation(client, workflow_id, decision)
        console.print(
            f"{workflow_id}: {receipt.action.value} accepted for step {receipt.step} "
            f"(role {receipt.role})",
            highlight=False,
        )

    guard(lambda: asyncio.run(body()), address=shown_address(address))


@escalations_app.command("list")
def escalations_list(
    address: AddressOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="Runs listed at most.")] = 100,
    task_queue: Annotated[
        str | None,
        typer.Option("--task-queue", help="Only runs of this task queue (default: all)."),
    ] = None,
) -> None:
    """Running workflows with EscalationState = "pending", oldest first: how long each has
    waited, its blocked steps, the reason and the time left before its timeout action."""
    from agent_failover.cli.escalations import list_pending, pending_table

    async def body() -> None:
        client = await connect(address)
        rows, truncated = await list_pending(client, limit, task_queue)
        if not rows:
            console.print("no workflow is waiting for a decision")
            return
        console.print(pending_table(rows))
        console.print(
            "show one with `failover escalations show ID`; answer with "
            "`failover resolve ID ACTION`",
            highlight=False,
        )
        if truncated:
            console.print(f"(the first {limit} only: raise --limit for more)")

    guard(lambda: asyncio.run(body()), address=shown_address(address))


@escalations_app.command("show")
def escalations_show(
    workflow_id: Annotated[str, typer.Argument(help="The paused run's workflow id.")],
    address: AddressOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the serialized escalation state as JSON.")
    ] = False,
) -> None:
    """One run's escalation: reason, blocked steps, state kept, decisions that apply and
    the exact `failover resolve` commands."""
    from agent_failover.cli.escalations import pending_escalation, show_renderables
    from agent_failover.cli.stackfile import ui_url

    async def body() -> None:
        client = await connect(address)
        row, status = await pending_escalation(client, workflow_id)
        if as_json:
            assert status.pending_escalation is not None
            print(status.pending_escalation.model_dump_json(indent=2))
            return
        ui = ui_url(shown_address(address))
        for part in show_renderables(row, status, ui, client.namespace):
            console.print(part, highlight=False, soft_wrap=isinstance(part, str))

    guard(lambda: asyncio.run(body()), address=shown_address(address))
