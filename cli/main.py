"""``failover``: the command line of agent-failover.

Commands talk to a Temporal cluster at ``--address`` / ``TEMPORAL_ADDRESS``; when a
``failover dev`` (or ``demo``) stack is running they find it through
``.failover/stack.json``. Every failure ends in one line on stderr saying what failed
and what to do next (exit 1; exit 2 for bad input), never a traceback (``-v`` shows it);
``dev`` and ``demo`` stop everything they started on Ctrl-C and SIGTERM alike.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError, guarded
from agent_failover.config import DEFAULT_POLICY_PATH

T = TypeVar("T")

app = typer.Typer(
    help="Failover and graceful degradation for multi-agent LLM pipelines on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Check policy files.", no_args_is_help=True)
app.add_typer(config_app, name="config")
escalations_app = typer.Typer(
    help="Pipelines waiting for a human: list them, show one (answer with `failover resolve`).",
    no_args_is_help=True,
)
app.add_typer(escalations_app, name="escalations")
# Tables are wide; when output is piped (CI logs, files) do not squeeze them to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


class _State:
    verbose = False


state = _State()


@app.callback()
def _setup(
    ctx: typer.Context,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Show details: every log line, HTTP request and traceback."
        ),
    ] = False,
) -> None:
    """Quiet by default: warnings only (breaker transitions, Redis lost); -v for everything."""
    import logging

    from agent_failover.logs import configure_logging, forward_core_logs

    state.verbose = verbose
    if ctx.invoked_subcommand == "worker":
        # The worker sets up its own logging and Temporal runtime (with the SDK metrics
        # buffer when metrics are exported): the runtime can be set once per process.
        return
    configure_logging(logging.WARNING, verbose=verbose, fmt="%(levelname)s %(message)s")
    forward_core_logs()
    for name in ("temporalio.workflow", "temporalio.activity"):
        # In-process workers (dev, demo): escalations and failed attempts are what the
        # tables and the progress line show; their log lines only repeat them.
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.ERROR)


def _guard(body: Callable[[], T], address: str | None = None) -> T:
    return guarded(body, err, verbose=state.verbose, address=address)


@contextmanager
def _port_in_use_said(port: int) -> Iterator[None]:
    """An address-in-use error as the one-line CLI error naming ``port``."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CliError(
                f"port {port} is already in use: stop what holds it or pass --port"
            ) from None
        raise


AddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="Temporal frontend host:port (default: TEMPORAL_ADDRESS, "
        "then the running `failover dev` stack, then 127.0.0.1:7233).",
    ),
]
TaskQueueOpt = Annotated[
    str | None,
    typer.Option(
        "--task-queue",
        help="The deployment's workflow task queue (default: FAILOVER_TASK_QUEUE, then the "
        "running `failover dev` stack's, then agent-failover).",
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


def _shown_address(address: str | None) -> str:
    from agent_failover.connect import connect_config

    return _address(address) or connect_config()["target_host"]


def _task_queue(task_queue: str | None) -> str:
    if task_queue:
        return task_queue
    if os.environ.get("FAILOVER_TASK_QUEUE"):
        return os.environ["FAILOVER_TASK_QUEUE"]
    from agent_failover.cli.devstack import read_stack_file

    stack = read_stack_file() or {}
    return stack.get("task_queue") or "agent-failover"


async def _client(address: str | None):
    from agent_failover.codec import CodecConfigError
    from agent_failover.connect import connect_client

    try:
        return await connect_client(_address(address))
    except CodecConfigError as exc:
        raise CliError(f"invalid payload codec settings: {exc}", EXIT_BAD_INPUT) from None
    except RuntimeError:
        raise CliError(
            f"cannot reach Temporal at {_shown_address(address)}: start a local stack with "
            "`failover dev`, or pass --address / set TEMPORAL_ADDRESS"
        ) from None


@config_app.command("check")
def config_check(
    file: Annotated[Path, typer.Argument(help="Policy YAML to validate.")] = DEFAULT_POLICY_PATH,
) -> None:
    """Validate a policy file: prints OK, or every error with its field path (exit 2)."""
    from agent_failover.config.loader import check_policy_file

    ok, lines = _guard(lambda: check_policy_file(file))
    for line in lines:
        (console if ok else err).print(line, markup=False, highlight=False, soft_wrap=True)
    if not ok:
        raise typer.Exit(EXIT_BAD_INPUT)


@app.command()
def sim(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 = any free port).")] = 8400,
    config: Annotated[Path | None, typer.Option(help="Simulator endpoints YAML.")] = None,
    scenario: Annotated[Path | None, typer.Option(help="Fault timeline YAML to load.")] = None,
) -> None:
    """Run the provider simulator (Anthropic, OpenAI, Gemini wire formats) in the foreground."""
    from agent_failover.testing.sim.server import run_simulator_blocking

    def body() -> None:
        with _port_in_use_said(port):
            run_simulator_blocking(port, config, scenario)

    _guard(body)


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
    """Embedded Temporal (with Web UI) + Redis + simulator + worker, until Ctrl-C or SIGTERM."""
    from agent_failover.cli.local import run_dev

    code = _guard(lambda: asyncio.run(run_dev(console, err, port, ui_port, sim_port, policy)))
    raise typer.Exit(code)


@app.command()
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

    inp = _guard(lambda: build_input(task, no_escalate, suppress_degraded))
    tq = _task_queue(task_queue)

    async def body() -> None:
        client = await _client(address)
        await run_pipeline(console, client, inp, tq, _address(address))

    _guard(lambda: asyncio.run(body()), address=_shown_address(address))


@app.command()
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
    """The health table: breaker state, p50/p95/p99 (ms), error rate, last probe and its age,
    context windows, and whether the shared store is degraded; then the rate budgets
    (requests and tokens left per endpoint and bulkhead, shared by every worker) and, for
    roles with shadow evaluation, each route's quality verdict (QUALITY_REGRESSION or ok,
    the drop of agreement with the reference route, samples against min_samples).

    By default it asks the deployment's health monitor (only Temporal access needed); the
    monitor refreshes the table every probe round. It answers within seconds when no
    worker runs, and says so when the monitor is not running.
    """
    from agent_failover.cli.health import show_monitor_status, table_from_store
    from agent_failover.cli.render import health_table, status_extras

    async def body() -> None:
        if from_store:
            table = await table_from_store(redis_url, namespace, policy, window_s)
            console.print(health_table(table))
            for extra in status_extras(table, now=table.taken_at):
                console.print(extra)
            return
        client = await _client(address)
        await show_monitor_status(console, client, _task_queue(task_queue))

    _guard(lambda: asyncio.run(body()), address=_shown_address(address))


@app.command()
def report(
    since: Annotated[
        str, typer.Option(help="Window: runs started in the last 30m, 1h, 2d...")
    ] = "1h",
    address: AddressOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="Runs read at most (newest first).")] = 500,
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
    and side effects. Reads the runs carrying the failover search attributes from Temporal.
    """
    from agent_failover.cli.report import build_report, parse_since, report_tables
    from agent_failover.cli.report_fetch import fetch_breakers, fetch_runs

    async def body() -> None:
        try:
            window = parse_since(since)
        except ValueError as exc:
            raise CliError(str(exc), EXIT_BAD_INPUT) from None
        client = await _client(address)
        runs, truncated = await fetch_runs(client, window, limit)
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

    _guard(lambda: asyncio.run(body()), address=_shown_address(address))


@app.command()
def qualify(
    role: Annotated[str, typer.Option("--role", help="Role whose roster is qualified.")],
    golden: Annotated[
        Path | None,
        typer.Option(
            "--golden",
            help="Golden set, JSONL: one {id, prompt, expected[, scorer, system]} per line "
            "(default: the shipped datasets/<role>.jsonl).",
        ),
    ] = None,
    min_quality: Annotated[
        float | None,
        typer.Option(
            "--min-quality",
            min=0.0,
            max=1.0,
            help="Quality (mean item score, 0..1) a route needs (default: the role's "
            "min_quality, else 0.85).",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="Lock file to write (other roles' entries are kept; default: the policy's "
            "qualification.lock_file, else ./roster.lock.yaml).",
        ),
    ] = None,
    scorer: Annotated[
        str | None,
        typer.Option(
            help="exact, normalized, json or judge (default: json when the role has an "
            "output_schema, else normalized); a line's own `scorer` wins."
        ),
    ] = None,
    judge_route: Annotated[
        str | None,
        typer.Option(help="Route that grades judge-scored items (default: the policy's)."),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, max=64, help="Items in flight at once, all routes together.")
    ] = 4,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Re-run even if this exact run already completed.")
    ] = False,
    policy: Annotated[
        Path | None,
        typer.Option(help="Policy YAML (default: FAILOVER_POLICY, the dev stack's, the demo's)."),
    ] = None,
    address: AddressOpt = None,
    task_queue: TaskQueueOpt = None,
) -> None:
    """Run a role's golden set against every route of its roster (a Temporal workflow),
    score the answers, measure p50/p95 latency and schema compliance, and write the lock
    file the planner reads. Exit 3 when the role is left without a qualified fallback.
    Re-running the same command attaches to (or reuses) the same run."""
    from agent_failover.cli import qualify as q

    args = q.QualifyArgs(role, golden, min_quality, output, scorer, judge_route, concurrency, fresh)
    policy_path = _policy_path(policy)
    cfg = _guard(lambda: _load_cli_policy(policy_path))
    golden_path = golden or q.default_golden(role)
    if golden is None and not golden_path.exists():
        _guard(lambda: _raise_bad(f"no shipped golden set for role {role!r}: pass --golden FILE"))
    inp = _guard(lambda: q.build_input(args, cfg, golden_path))
    lock_file = q.output_path(output, cfg, policy_path)
    tq = _task_queue(task_queue)

    async def body():
        client = await _client(address)
        return await q.run_qualify(console, client, inp, tq, fresh)

    result = _guard(lambda: asyncio.run(body()), address=_shown_address(address))
    role_policy = cfg.role(role)
    console.print(q.result_table(result, role_policy))
    _guard(lambda: q.update_lock(lock_file, role, q.role_qualification(result)))
    console.print(f"wrote {lock_file} (role {role})", highlight=False)
    problems = q.gate(result, role_policy)
    for line in problems:
        err.print(f"error: {line}", markup=False, highlight=False)
    if problems:
        raise typer.Exit(q.EXIT_UNQUALIFIED)


def _raise_bad(message: str) -> None:
    raise CliError(message, EXIT_BAD_INPUT)


def _policy_path(flag: Path | None) -> Path:
    """--policy, else FAILOVER_POLICY, else the running dev stack's, else the demo policy."""
    if flag is not None:
        return flag
    if os.environ.get("FAILOVER_POLICY"):
        return Path(os.environ["FAILOVER_POLICY"])
    from agent_failover.cli.devstack import read_stack_file

    stack = read_stack_file() or {}
    return Path(stack["policy"]) if stack.get("policy") else DEFAULT_POLICY_PATH


def _load_cli_policy(path: Path):
    """The policy without its lock (qualify writes the lock), or exit 2 with every field."""
    from agent_failover.config.loader import load_policy
    from agent_failover.resilience.config import PolicyError

    try:
        return load_policy(path, with_lock=False)
    except PolicyError as exc:
        raise CliError(f"invalid policy {path}:\n{exc}", EXIT_BAD_INPUT) from None


@app.command()
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
    tq = _task_queue(task_queue)

    async def body() -> None:
        client = await _client(address)
        done = await override_route(client, tq, route, mapping[state_])
        change = "unchanged" if not done.changed else f"{done.from_state.value} →"
        console.print(f"{route}: {change} {done.to_state.value}", highlight=False)

    _guard(lambda: asyncio.run(body()), address=_shown_address(address))


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
    """Resolve a pipeline paused for a human (escalation); refused unless it is waiting."""
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
        client = await _client(address)
        receipt = await resolve_escalation(client, workflow_id, decision)
        console.print(
            f"{workflow_id}: {receipt.action.value} accepted for step {receipt.step} "
            f"(role {receipt.role})",
            highlight=False,
        )

    _guard(lambda: asyncio.run(body()), address=_shown_address(address))


@escalations_app.command("list")
def escalations_list(
    address: AddressOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="Runs listed at most.")] = 100,
) -> None:
    """Running pipelines with EscalationState = "pending", oldest first: how long each has
    waited, its blocked steps, the reason and the time left before its timeout action."""
    from agent_failover.cli.escalations import list_pending, pending_table

    async def body() -> None:
        client = await _client(address)
        rows, truncated = await list_pending(client, limit)
        if not rows:
            console.print("no pipeline is waiting for a decision")
            return
        console.print(pending_table(rows))
        console.print(
            "show one with `failover escalations show ID`; answer with "
            "`failover resolve ID ACTION`",
            highlight=False,
        )
        if truncated:
            console.print(f"(the first {limit} only: raise --limit for more)")

    _guard(lambda: asyncio.run(body()), address=_shown_address(address))


@escalations_app.command("show")
def escalations_show(
    workflow_id: Annotated[str, typer.Argument(help="The paused pipeline's workflow id.")],
    address: AddressOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the serialized escalation state as JSON.")
    ] = False,
) -> None:
    """One pipeline's escalation: reason, blocked steps, state kept, decisions that apply and
    the exact `failover resolve` commands."""
    from agent_failover.cli.escalations import pending_escalation, show_renderables
    from agent_failover.testing.servers import ui_url

    async def body() -> None:
        client = await _client(address)
        row, status = await pending_escalation(client, workflow_id)
        if as_json:
            assert status.pending_escalation is not None
            print(status.pending_escalation.model_dump_json(indent=2))
            return
        ui = ui_url(_shown_address(address))
        for part in show_renderables(row, status, ui, client.namespace):
            console.print(part, highlight=False, soft_wrap=isinstance(part, str))

    _guard(lambda: asyncio.run(body()), address=_shown_address(address))


@app.command("webhook-receiver")
def webhook_receiver(
    port: Annotated[int, typer.Option(help="Port on --host (0 = any free port).")] = 8765,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    path: Annotated[str, typer.Option(help="URL path notifications are posted to.")] = "/",
) -> None:
    """A local on-call webhook: prints each escalation notification and checks its signature
    against FAILOVER_ESCALATION_WEBHOOK_SECRET (401 when it does not match)."""
    from agent_failover.cli.escalations import serve_receiver

    def body() -> None:
        with _port_in_use_said(port):
            asyncio.run(serve_receiver(console, host, port, path))

    _guard(body)


@app.command()
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
    from agent_failover.cli.demo import run_demo

    code = _guard(
        lambda: asyncio.run(
            run_demo(
                console,
                serve=serve,
                temporal_port=port,
                ui_port=ui_port,
                clean=not keep_state,
                verbose=state.verbose,
            )
        )
    )
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

    spec = _guard(load)
    _guard(
        lambda: asyncio.run(
            run_drill_command(spec, console, policy_path=policy, json_path=out, png_path=png)
        )
    )


@app.command("chaos-proxy")
def chaos_proxy(
    upstream: Annotated[
        str, typer.Option(help="The real endpoint to front, e.g. https://api.anthropic.com.")
    ],
    scenario: Annotated[
        Path,
        typer.Option(help="Fault timeline: a simulator scenario or drill file (bench/scenarios)."),
    ],
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
) -> None:
    """Put the simulator's fault timeline in front of a real endpoint (staging only): the
    scenario's faults are injected into live traffic, everything else passes unchanged."""
    from agent_failover.cli.chaos_proxy import run_chaos_proxy

    def body() -> None:
        with _port_in_use_said(port):
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
            )

    _guard(body)


def main() -> None:
    """The ``failover`` console script: the app, then an exit that skips finalization
    (a command that used a Temporal client can otherwise abort at exit, see
    :func:`agent_failover.connect.run_and_exit`)."""
    from agent_failover.connect import run_and_exit

    run_and_exit(app)


if __name__ == "__main__":  # pragma: no cover
    main()
