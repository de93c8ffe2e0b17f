"""``failover``: the command line of agent-failover.

Commands talk to a Temporal cluster at ``--address`` / ``TEMPORAL_ADDRESS``; when a
``failover dev`` stack is running they find it through ``.failover/stack.json``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from agent_failover.config import DEFAULT_POLICY_PATH

app = typer.Typer(
    help="Failover and graceful degradation for multi-agent LLM pipelines on Temporal.",
    no_args_is_help=True,
    add_completion=False,
)
config_app = typer.Typer(help="Check policy files.", no_args_is_help=True)
app.add_typer(config_app, name="config")
# Tables are wide; when output is piped (CI logs, files) do not squeeze them to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True)


@app.callback()
def _setup(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log every activity failure.")
    ] = False,
) -> None:
    """Logging: breaker transitions and warnings; expected activity failures only with -v."""
    import logging

    from rich.logging import RichHandler

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_path=False, markup=False)],
    )
    if not verbose:
        # Failed attempts are the point of failover; they are shown in tables instead.
        logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
        logging.getLogger("temporalio.workflow").setLevel(logging.ERROR)


AddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="Temporal frontend host:port (default: TEMPORAL_ADDRESS, "
        "then the running `failover dev` stack, then 127.0.0.1:7233).",
    ),
]


def _address(address: str | None) -> str | None:
    """--address, else TEMPORAL_ADDRESS / the profile, else a running `failover dev` stack."""
    if address:
        return address
    from agent_failover.connect import connect_config

    if os.environ.get("TEMPORAL_ADDRESS") or connect_config().get("api_key"):
        return None  # envconfig has it (and its TLS / API key settings)
    from agent_failover.cli.devstack import read_stack_file

    stack = read_stack_file()
    return stack["temporal_address"] if stack else None


async def _client(address: str | None):
    from agent_failover.codec import CodecConfigError
    from agent_failover.connect import connect_client, connect_config

    addr = _address(address)
    try:
        return await connect_client(addr)
    except CodecConfigError as exc:
        err.print(f"[red]invalid payload codec settings[/]: {exc}")
        raise typer.Exit(2) from exc
    except RuntimeError as exc:
        addr = addr or connect_config()["target_host"]
        err.print(
            f"[red]cannot reach Temporal at {addr}[/]: {exc}\n"
            "Start a local stack with [bold]failover dev[/] or pass --address / TEMPORAL_ADDRESS."
        )
        raise typer.Exit(1) from exc


TaskQueueOpt = Annotated[
    str, typer.Option("--task-queue", help="The deployment's workflow task queue.")
]


@config_app.command("check")
def config_check(
    file: Annotated[Path, typer.Argument(help="Policy YAML to validate.")] = DEFAULT_POLICY_PATH,
) -> None:
    """Validate a policy file: prints OK, or every error with its field path (exit 2)."""
    from agent_failover.config.loader import check_policy_file

    ok, lines = check_policy_file(file)
    for line in lines:
        (console if ok else err).print(line, markup=False, highlight=False)
    if not ok:
        raise typer.Exit(2)


@app.command()
def sim(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 = any free port).")] = 8400,
    config: Annotated[Path | None, typer.Option(help="Simulator endpoints YAML.")] = None,
    scenario: Annotated[Path | None, typer.Option(help="Fault timeline YAML to load.")] = None,
) -> None:
    """Run the provider simulator (Anthropic, OpenAI, Gemini wire formats) in the foreground."""
    from agent_failover.testing.sim.server import run_simulator_blocking

    run_simulator_blocking(port, config, scenario)


@app.command()
def worker() -> None:
    """Run a worker (same as `python worker.py`); configured by environment variables."""
    from agent_failover.service import run as run_worker

    run_worker()


@app.command("codec-server")
def codec_server(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 = any free port).")] = 8081,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="Temporal UI origin allowed to call it (repeatable; default "
            "FAILOVER_CODEC_CORS_ORIGINS, else localhost:8080 and :8233)."
        ),
    ] = None,
) -> None:
    """Decrypt payloads for the Temporal UI and CLI (keys: FAILOVER_CODEC_KEYS; bearer token:
    FAILOVER_CODEC_SERVER_TOKEN)."""
    from agent_failover.codec import AesGcmCodec, CodecConfigError

    try:
        codec = AesGcmCodec.from_env()
    except CodecConfigError as exc:
        err.print(f"[red]cannot start the codec server[/]: {exc}")
        raise typer.Exit(2) from exc
    from agent_failover.cli.codec_server import CodecServerSettings, serve

    serve(codec, CodecServerSettings.from_env(cors_origin), host=host, port=port)


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="Temporal gRPC port.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Temporal Web UI port.")] = 8233,
    sim_port: Annotated[int, typer.Option(help="Simulator port.")] = 8400,
    policy: Annotated[Path | None, typer.Option(help="Policy YAML.")] = None,
) -> None:
    """Embedded Temporal (with Web UI) + Redis + simulator + worker, until Ctrl-C."""
    from agent_failover.cli.devstack import start_stack

    async def _run() -> None:
        with console.status("starting simulator, Temporal dev server, Redis and worker…"):
            stack = await start_stack(
                policy_path=policy, temporal_port=port, ui_port=ui_port, sim_port=sim_port
            )
        console.print(f"Temporal   [bold]{stack.address}[/]   Web UI [link]{stack.ui}[/link]")
        console.print(f"Simulator  [bold]{stack.sim.url}[/]   admin {stack.sim.url}/_admin/")
        console.print(f"Redis      [bold]{stack.deps.stores.backend}[/]")
        console.print(
            'Try: [bold]failover run "Compare two databases for a ledger"[/]  (Ctrl-C stops)'
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        import signal

        for s in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(s, stop.set)
        try:
            await stop.wait()
        finally:
            with console.status("stopping…"):
                await stack.stop()

    asyncio.run(_run())


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What the pipeline should do.")],
    address: AddressOpt = None,
    task_queue: TaskQueueOpt = "agent-failover",
    no_escalate: Annotated[
        bool, typer.Option("--no-escalate", help="Never pause for a human.")
    ] = False,
    suppress_degraded: Annotated[
        bool, typer.Option(help="Leave degraded sections out of the answer.")
    ] = False,
) -> None:
    """Start a pipeline, show its progress, print the answer and the per-step table."""
    from agent_failover.cli.devstack import ui_url
    from agent_failover.cli.render import steps_table
    from agent_failover.workflows.models import (
        PipelineInput,
        PipelineOptions,
        PipelineResult,
        PipelineStatus,
    )
    from agent_failover.workflows.pipeline import AgentPipelineWorkflow

    try:
        inp = PipelineInput(
            task=task,
            options=PipelineOptions(
                escalate_on_critical_degraded=not no_escalate,
                suppress_degraded_sections=suppress_degraded,
            ),
        )
    except Exception as exc:  # pydantic ValidationError: show the field, not a traceback
        err.print(f"[red]invalid input[/]: {exc}")
        raise typer.Exit(2) from exc

    async def _run() -> None:
        client = await _client(address)
        wid = f"pipeline-{uuid.uuid4().hex[:12]}"
        handle = await client.start_workflow(
            AgentPipelineWorkflow.run,
            inp,
            id=wid,
            task_queue=task_queue,
            result_type=PipelineResult,
        )
        started = time.monotonic()
        with console.status("running") as st:
            result_task = asyncio.create_task(handle.result())
            while not result_task.done():
                try:
                    s: PipelineStatus = await handle.query(
                        AgentPipelineWorkflow.status, result_type=PipelineStatus
                    )
                    st.update(
                        f"{s.phase} · {len(s.completed_steps)} steps done · "
                        f"{s.summary.substitutions} substitutions · escalation {s.escalation.value}"
                        f" · {time.monotonic() - started:.1f}s"
                    )
                except Exception:
                    pass
                await asyncio.wait([result_task], timeout=0.5)
            result = result_task.result()
        console.rule("answer")
        console.print(result.answer, markup=False)
        console.print(steps_table(result))
        s = result.summary
        console.print(
            f"confidence {result.confidence:.2f} · substitutions {s.substitutions} · worst tier "
            f"{s.worst_tier} · degraded steps {len(s.degraded_steps)}"
        )
        ui = ui_url(_address(address))
        if ui:
            console.print(f"Temporal UI: [link]{ui}/namespaces/default/workflows/{wid}[/link]")

    asyncio.run(_run())


@app.command()
def status(
    address: AddressOpt = None,
    task_queue: TaskQueueOpt = "agent-failover",
    from_store: Annotated[
        bool,
        typer.Option(
            "--from-store",
            help="Read the shared health store directly instead of asking the health monitor.",
        ),
    ] = False,
    redis_url: Annotated[
        str | None,
        typer.Option(help="With --from-store: Redis (default REDIS_URL or the dev stack's)."),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(help="With --from-store: key namespace (default FAILOVER_REDIS_NAMESPACE)."),
    ] = None,
    policy: Annotated[
        Path | None, typer.Option(help="With --from-store: policy YAML for the route list.")
    ] = None,
    window_s: Annotated[float, typer.Option(help="With --from-store: rolling window.")] = 60.0,
) -> None:
    """The health table: breaker state, p50/p95/p99, error rate, last probe.

    By default it asks the deployment's health monitor (only Temporal access needed); the
    monitor refreshes the table every probe round.
    """
    from agent_failover.cli.render import health_table
    from agent_failover.workflows.models import MonitorTable
    from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id

    async def _run() -> None:
        if from_store:
            console.print(
                health_table(await _table_from_store(redis_url, namespace, policy, window_s))
            )
            return
        client = await _client(address)
        monitor = client.get_workflow_handle(monitor_workflow_id(task_queue))
        try:
            table: MonitorTable = await monitor.query(
                HealthMonitorWorkflow.health, result_type=MonitorTable
            )
        except Exception as exc:
            err.print(
                f"[red]no health monitor for task queue {task_queue!r}[/] ({exc}).\n"
                "Is a worker running? Or read the store directly with --from-store."
            )
            raise typer.Exit(1) from exc
        if table.table is None:
            err.print("the health monitor has not finished its first round yet; try again")
            raise typer.Exit(1)
        console.print(health_table(table.table))
        console.print(
            f"health monitor: probing {'paused' if table.paused else 'active'}, "
            f"{table.rounds} rounds"
        )

    asyncio.run(_run())


async def _table_from_store(
    redis_url: str | None, namespace: str | None, policy: Path | None, window_s: float
):
    """The health table read straight from the shared store (needs Redis access)."""
    from agent_failover.activities.models import HealthTable
    from agent_failover.cli.devstack import read_stack_file
    from agent_failover.config.loader import load_policy_or_exit
    from agent_failover.stores.factory import connect_stores

    stack = read_stack_file() or {}
    if stack.get("sim_url") and not os.environ.get("SIM_URL"):
        os.environ["SIM_URL"] = stack["sim_url"]
    pol = load_policy_or_exit(policy or os.environ.get("FAILOVER_POLICY", DEFAULT_POLICY_PATH))
    url = redis_url or os.environ.get("REDIS_URL") or stack.get("redis_url")
    ns = namespace or stack.get("namespace") or os.environ.get("FAILOVER_REDIS_NAMESPACE")
    try:
        stores = await connect_stores(url, embedded_fallback=False, namespace=ns or "failover")
    except Exception as exc:
        err.print(f"[red]cannot reach the health store at {url}[/]: {exc}")
        raise typer.Exit(1) from exc
    try:
        now = time.time()
        routes = sorted(pol.endpoints)
        snap = await stores.health.snapshot(routes, now=now, window_s=window_s, min_calls=1)
        return HealthTable(
            taken_at=now,
            rows=[snap.get(r) for r in routes],
            breakers=[await stores.health.breaker(r) for r in routes],
            store=stores.backend,
        )
    finally:
        await stores.close()


@app.command()
def force(
    route: Annotated[str, typer.Argument(help="Route (endpoint name).")],
    state: Annotated[str, typer.Argument(help="open, closed or release.")],
    address: AddressOpt = None,
    task_queue: TaskQueueOpt = "agent-failover",
) -> None:
    """Operator override of a route's breaker (through the health monitor)."""
    from agent_failover.resilience.contracts import BreakerState
    from agent_failover.workflows.models import ForceRouteSignal
    from agent_failover.workflows.monitor import HealthMonitorWorkflow, monitor_workflow_id

    mapping = {
        "open": BreakerState.FORCED_OPEN,
        "closed": BreakerState.FORCED_CLOSED,
        "release": None,
    }
    if state not in mapping:
        err.print(f"[red]state must be open, closed or release, not {state!r}[/]")
        raise typer.Exit(2)

    async def _run() -> None:
        client = await _client(address)
        handle = client.get_workflow_handle(monitor_workflow_id(task_queue))
        await handle.signal(
            HealthMonitorWorkflow.force_route, ForceRouteSignal(route=route, state=mapping[state])
        )
        console.print(f"sent: {route} → {state}")

    asyncio.run(_run())


@app.command()
def resolve(
    workflow_id: Annotated[str, typer.Argument(help="The paused pipeline's workflow id.")],
    action: Annotated[str, typer.Argument(help="retry, accept_degraded, provide_output or abort.")],
    output: Annotated[str | None, typer.Option(help="The answer, for provide_output.")] = None,
    operator: Annotated[str, typer.Option(help="Who decided (audit).")] = os.environ.get(
        "USER", "operator"
    ),
    note: Annotated[str, typer.Option(help="Why (audit).")] = "",
    address: AddressOpt = None,
) -> None:
    """Resolve a pipeline paused for a human (escalation)."""
    from agent_failover.workflows.models import EscalationDecision
    from agent_failover.workflows.pipeline import AgentPipelineWorkflow

    try:
        decision = EscalationDecision(action=action, output=output, operator=operator, note=note)
    except Exception as exc:
        err.print(f"[red]invalid decision[/]: {exc}")
        raise typer.Exit(2) from exc
    if decision.action.value == "provide_output" and not decision.output:
        err.print("[red]provide_output needs --output TEXT[/]")
        raise typer.Exit(2)

    async def _run() -> None:
        client = await _client(address)
        await client.get_workflow_handle(workflow_id).signal(
            AgentPipelineWorkflow.resolve_escalation, decision
        )
        console.print(f"sent {decision.action.value} to {workflow_id}")

    asyncio.run(_run())


@app.command()
def demo(
    serve: Annotated[
        bool, typer.Option("--serve", help="Keep the stack (and Web UI) up afterwards.")
    ] = False,
    ui_port: Annotated[int, typer.Option(help="Temporal Web UI port.")] = 8233,
    port: Annotated[int, typer.Option(help="Temporal gRPC port.")] = 7233,
) -> None:
    """The outage demo: healthy runs, region down, provider down, everything down, recovery."""
    from agent_failover.cli.demo import run_demo

    code = asyncio.run(run_demo(console, serve=serve, temporal_port=port, ui_port=ui_port))
    raise typer.Exit(code)


@app.command()
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
) -> None:
    """Replay an outage timeline at a fixed request rate and report what callers saw."""
    from agent_failover.cli.drill import run_drill_command
    from agent_failover.testing.drill import load_drill

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
        err.print(f"[red]invalid drill[/]: {exc}")
        raise typer.Exit(2) from exc
    asyncio.run(run_drill_command(spec, console, policy_path=policy, json_path=out, png_path=png))


def main() -> None:  # pragma: no cover - console entry convenience
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
