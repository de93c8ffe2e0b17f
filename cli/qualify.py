"""``failover qualify``: run a role's golden set against its routes, write the lock file.

Reads the golden set (JSONL, one :class:`GoldenItem` per line), starts — or attaches to —
the ``QualifyWorkflow`` whose id is derived from the role, the set's hash and the routes,
shows a progress bar from its ``progress`` query, prints the per-route table, merges the
role's verdicts into the lock file and exits :data:`EXIT_UNQUALIFIED` when the role is
left without a qualified fallback (a CI gate). A completed run with the same id is
reused (nothing re-scored) unless ``--fresh``.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError, validation_lines
from agent_failover.cli.ops import require_worker
from agent_failover.config.lock import read_lock, relative_golden_path, write_lock
from agent_failover.resilience.config import PolicyConfig, PolicyError, RolePolicy
from agent_failover.resilience.config.gates import (
    gate_failures,
    role_fingerprint,
    route_unqualified,
    with_verdicts,
)
from agent_failover.resilience.qualification import (
    DEFAULT_MIN_QUALITY,
    MAX_GOLDEN_ITEMS,
    GoldenItem,
    QualificationLock,
    RoleQualification,
)
from agent_failover.resilience.quality import ScorerSpec
from agent_failover.workflows.qualify import (
    QualifyInput,
    QualifyProgress,
    QualifyResult,
    QualifyWorkflow,
    qualify_workflow_id,
)

#: Exit code when a role is left without a qualified fallback (1: the run failed, 2: input).
EXIT_UNQUALIFIED = 3
POLL_S = 0.5


@dataclass
class QualifyArgs:
    role: str | None
    golden: Path | None
    min_quality: float | None
    output: Path | None
    scorer: str | None
    judge_route: str | None
    concurrency: int
    fresh: bool


def default_golden(role: str) -> Path:
    """The shipped sample golden set for ``role`` (``datasets/<role>.jsonl``)."""
    from agent_failover import datasets

    return Path(datasets.__file__).resolve().parent / f"{role}.jsonl"


def read_golden(path: Path) -> list[GoldenItem]:
    """The golden set, or a CliError (exit 2) naming each bad line and field."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CliError(
            f"cannot read golden set {path}: {exc.strerror or exc}", EXIT_BAD_INPUT
        ) from None
    items, problems = [], []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            items.append(GoldenItem.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{n}: not JSON ({exc.msg})")
        except ValidationError as exc:
            problems += [f"{path}:{n}: {ln}" for ln in validation_lines(exc)]
    if not items and not problems:
        problems.append(f"{path}: no golden items (one JSON object per line)")
    if len(items) > MAX_GOLDEN_ITEMS:
        problems.append(f"{path}: {len(items)} items, at most {MAX_GOLDEN_ITEMS}: split the set")
    if problems:
        raise CliError("invalid golden set:\n  " + "\n  ".join(problems[:20]), EXIT_BAD_INPUT)
    return items


def build_input(args: QualifyArgs, policy: PolicyConfig, golden: Path) -> QualifyInput:
    """The workflow input: role, routes, items, scorer and threshold (exit 2 when wrong)."""
    assert args.role is not None
    try:
        role = policy.role(args.role)
    except PolicyError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    items = read_golden(golden)
    kind = args.scorer or ("json" if role.output_schema else "normalized")
    try:
        scorer = ScorerSpec(
            kind=kind,
            json_schema=role.output_schema if kind == "json" else None,
            judge_route=args.judge_route,
        )
    except ValidationError as exc:
        raise CliError("; ".join(validation_lines(exc, "--scorer ")), EXIT_BAD_INPUT) from None
    if _needs_judge(scorer, items) and not (args.judge_route or policy.qualification.judge_route):
        raise CliError(
            "the golden set uses the judge scorer but no judge route is set: pass --judge-route "
            "or set qualification.judge_route in the policy",
            EXIT_BAD_INPUT,
        )
    routes = role.roster.routes()
    return QualifyInput(
        role=args.role,
        golden_set=golden.name,
        items=items,
        routes=routes,
        models={r: policy.endpoint(r).model for r in routes},
        scorer=scorer,
        min_quality=_min_quality(args.min_quality, role),
        with_schema=role.output_schema is not None,
        concurrency=args.concurrency,
        item_timeout_s=role.attempt_timeout / 1000,
    )


def _needs_judge(scorer: ScorerSpec, items: list[GoldenItem]) -> bool:
    return scorer.kind == "judge" or any(
        i.scorer is not None and i.scorer.kind == "judge" and not i.scorer.judge_route
        for i in items
    )


def _min_quality(flag: float | None, role: RolePolicy) -> float:
    """--min-quality, but never below the role's own (the planner applies the higher).
    It is an absolute floor; the relative gate (``quality_gates``) applies on top."""
    if flag is not None:
        return max(flag, role.min_quality)
    return max(role.min_quality, DEFAULT_MIN_QUALITY)


async def run_qualify(
    console: Console, client: Client, inp: QualifyInput, task_queue: str, fresh: bool
) -> QualifyResult:
    """Start or attach to the role's qualification run and wait for its result."""
    wid = qualify_workflow_id(inp)
    handle = client.get_workflow_handle(wid, result_type=QualifyResult)
    status = await _status(handle)
    if status is WorkflowExecutionStatus.COMPLETED and not fresh:
        console.print(f"reusing the completed run {wid} (nothing re-scored; --fresh re-runs it)")
        return await handle.result()
    await require_worker(client, task_queue)
    attaching = status is WorkflowExecutionStatus.RUNNING
    handle = await client.start_workflow(
        QualifyWorkflow.run,
        inp,
        id=wid,
        task_queue=task_queue,
        result_type=QualifyResult,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        static_summary=f"qualify {inp.role} on {len(inp.routes)} routes ({inp.golden_set})",
    )
    verb = "attached to the running" if attaching else "started"
    console.print(f"{verb} {wid} on task queue {task_queue}", highlight=False)
    return await _follow(console, handle)


async def _status(handle: WorkflowHandle) -> WorkflowExecutionStatus | None:
    try:
        return (await handle.describe()).status
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return None
        raise


async def _follow(console: Console, handle: WorkflowHandle) -> QualifyResult:
    """Wait for the result with a progress bar fed by the ``progress`` query."""
    result = asyncio.create_task(handle.result())
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task("qualifying", total=None, note="")
            while not result.done():
                try:
                    p: QualifyProgress = await handle.query(
                        QualifyWorkflow.progress,
                        result_type=QualifyProgress,
                        rpc_timeout=timedelta(seconds=5),
                    )
                    note = f"{p.running} running, {p.errors} errors"
                    bar.update(task, total=p.total, completed=p.done, note=note)
                except Exception:
                    # A query may fail across continue-as-new or as the run closes.
                    if result.done():
                        break
                await asyncio.wait([result], timeout=POLL_S)
            out = await result
            n = out.items * len(out.routes)
            errors = sum(rep.verdict.errors for rep in out.routes.values())
            bar.update(task, total=n, completed=n, note=f"done, {errors} errors")
            return out
    finally:
        if not result.done():
            result.cancel()


def role_qualification(
    result: QualifyResult,
    role: RolePolicy,
    golden: Path | None = None,
    lock_file: Path | None = None,
) -> RoleQualification:
    """The lock entry for one finished run: every route's verdict by the role's quality
    gates, and the hashes of what the role was qualified with."""
    entry = RoleQualification(
        golden_set=result.golden_set,
        golden_hash=result.golden_hash,
        scorer=result.scorer,
        min_quality=result.min_quality,
        qualified_at=result.finished_at,
        routes={r: rep.verdict for r, rep in result.routes.items()},
        golden_path=None
        if golden is None or lock_file is None
        else relative_golden_path(golden, lock_file),
        fingerprint=role_fingerprint(role),
    )
    return with_verdicts(role, entry)


def result_table(result: QualifyResult, role: RolePolicy) -> Table:
    """Per route: tier, model, quality, pass rate, schema compliance, p50/p95, verdict."""
    gates = role.quality_gates
    table = Table(
        title=f"qualification of role {result.role!r}: {result.items} items from "
        f"{result.golden_set} ({result.golden_hash}), min_quality {result.min_quality:.2f}, "
        f"{gates.relative_min_score:.0%} of the primary"
    )
    for col in ("tier", "route", "model", "quality", "pass", "schema", "errors", "p50 ms",
                "p95 ms", "verdict"):  # fmt: skip
        table.add_column(col, justify="right" if col.endswith(("ms", "quality")) else "left")
    tiers = {r: t for t, routes in role.roster.tiers() for r in routes}
    attached = role.model_copy(update={"qualification": role_qualification(result, role)})
    for route, rep in result.routes.items():
        v = rep.verdict
        why = route_unqualified(route, attached)
        table.add_row(
            str(tiers.get(route, "?")),
            route,
            v.model,
            f"{v.quality:.2f}",
            f"{v.pass_rate:.0%}",
            "-" if v.schema_compliance is None else f"{v.schema_compliance:.0%}",
            str(v.errors),
            _ms(v.latency_p50_ms),
            _ms(v.latency_p95_ms),
            "qualified" if why is None else f"UNQUALIFIED: {_short(why)}",
        )
    return table


def _short(reason: str) -> str:
    """The gate part of an unqualified reason (without the golden set it was measured on)."""
    text = reason.removeprefix("unqualified: ")
    return text.split(" on golden set ")[0]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def update_lock(path: Path, role: str, entry: RoleQualification) -> QualificationLock:
    """Merge the role's entry into the lock file (other roles kept) and write it."""
    lock = QualificationLock()
    if path.exists():
        try:
            lock = read_lock(path)
        except PolicyError as exc:
            raise CliError(
                f"cannot update {path}: {exc}; fix or delete it, then re-run", EXIT_BAD_INPUT
            ) from None
    lock = lock.with_role(role, entry)
    try:
        write_lock(path, lock)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    return lock


def gate(result: QualifyResult, role: RolePolicy) -> list[str]:
    """The CI gate's problems for this run (empty: the role has a qualified fallback)."""
    entry = role_qualification(result, role)
    return gate_failures(role.model_copy(update={"qualification": entry}))


def output_path(flag: Path | None, policy: PolicyConfig, policy_path: Path) -> Path:
    """--output, else the policy's qualification.lock_file, else ./roster.lock.yaml."""
    from agent_failover.config.lock import lock_path

    if flag is not None:
        return flag
    return lock_path(policy, policy_path) or Path(os.getcwd()) / "roster.lock.yaml"
