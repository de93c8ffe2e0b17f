"""Checking what a deployment will run on: ``config check`` (the policy file) and
``qualify`` (a role's roster against its golden set, written to the lock file).

Neither loads the dev stack or the test helpers. :mod:`agent_failover.cli.main` registers
them on the app.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError
from agent_failover.cli.policyfile import load_policy_without_lock, policy_path
from agent_failover.cli.shared import (
    AddressOpt,
    TaskQueueOpt,
    connect,
    console,
    err,
    guard,
    shown_address,
    task_queue_for,
)
from agent_failover.config import DEFAULT_POLICY_PATH

#: This module's top-level commands; main lists them in the app's help order.
commands = typer.Typer()
config_app = typer.Typer(help="Check policy files; print their JSON Schema.", no_args_is_help=True)


@config_app.command("check")
def config_check(
    file: Annotated[Path, typer.Argument(help="Policy YAML to validate.")] = DEFAULT_POLICY_PATH,
) -> None:
    """Validate a policy file: prints OK, or every error with its field path (exit 2)."""
    from agent_failover.config.loader import check_policy_file

    ok, lines = guard(lambda: check_policy_file(file))
    for line in lines:
        (console if ok else err).print(line, markup=False, highlight=False, soft_wrap=True)
    if not ok:
        raise typer.Exit(EXIT_BAD_INPUT)


@config_app.command("schema")
def config_schema() -> None:
    """Print the policy file's JSON Schema, which editors complete and check policies with."""
    import sys

    from agent_failover.config.schema import schema_text

    sys.stdout.write(schema_text())


@commands.command("qualify")
def qualify(
    role: Annotated[
        str | None,
        typer.Option("--role", help="Role whose roster is qualified (with --check: every role)."),
    ] = None,
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
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="CI gate without a Temporal server: run the golden sets in this process "
            "(every role, or --role), apply the quality gates, exit 3 when a role has no "
            "qualified fallback. Writes the lock only with --output.",
        ),
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
    path = policy_path(policy)
    cfg = guard(lambda: load_policy_without_lock(path))
    if check:
        _check(args, cfg)
        return
    if role is None:
        guard(lambda: _raise_bad("--role is required (or --check, which checks every role)"))
    golden_path = golden or q.default_golden(role)
    if golden is None and not golden_path.exists():
        guard(lambda: _raise_bad(f"no shipped golden set for role {role!r}: pass --golden FILE"))
    inp = guard(lambda: q.build_input(args, cfg, golden_path))
    lock_file = q.output_path(output, cfg, path)
    tq = task_queue_for(task_queue)

    async def body():
        client = await connect(address)
        return await q.run_qualify(console, client, inp, tq, fresh)

    result = guard(lambda: asyncio.run(body()), address=shown_address(address))
    role_policy = cfg.role(role)
    console.print(q.result_table(result, role_policy))
    entry = q.role_qualification(result, role_policy, golden_path, lock_file)
    guard(lambda: q.update_lock(lock_file, role, entry))
    console.print(f"wrote {lock_file} (role {role})", highlight=False)
    problems = q.gate(result, role_policy)
    for line in problems:
        err.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(q.EXIT_UNQUALIFIED)


def _check(args, cfg) -> None:
    """``qualify --check``: every role (or --role) qualified in-process, gates applied."""
    from agent_failover.cli import qualify as q
    from agent_failover.cli import qualify_check as c

    if args.golden is not None and args.role is None:
        guard(lambda: _raise_bad("--golden needs --role (one golden set per role)"))
    problems: list[str] = []
    for name in guard(lambda: c.roles_to_check(cfg, args.role)):
        golden = c.golden_for(args.golden, q.default_golden(name))
        if golden is None:
            problems.append(f"role {name!r}: no golden set (pass --role {name} --golden FILE)")
            continue
        one = dataclasses.replace(args, role=name)
        inp = guard(lambda one=one, golden=golden: q.build_input(one, cfg, golden))
        result = guard(lambda inp=inp: asyncio.run(c.check_role(cfg, inp)))
        role_policy = cfg.role(name)
        console.print(q.result_table(result, role_policy))
        if args.output is not None:
            entry = q.role_qualification(result, role_policy, golden, args.output)
            guard(lambda name=name, entry=entry: q.update_lock(args.output, name, entry))
            console.print(f"wrote {args.output} (role {name})", highlight=False)
        problems += q.gate(result, role_policy)
    for line in problems:
        err.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(q.EXIT_UNQUALIFIED)
    console.print("every role has a qualified fallback", highlight=False)


def _raise_bad(message: str) -> NoReturn:
    raise CliError(message, EXIT_BAD_INPUT)
