"""The outage demo (the README's main command): every tier of the failover path, live.

It starts the whole stack in-process (simulator, Temporal dev server with Web UI,
Redis or an embedded one, worker), runs pipelines while injecting an outage in steps —
primary region overloaded, whole primary provider down, the other big provider down,
everything down — then clears the faults and waits for the health monitor's probes to
close the breakers again. It prints what happened as tables and checks itself: the exit
code is non-zero unless every tier was seen and every pipeline ended with an answer.

Each demo starts from a clean Temporal database (``--keep-state`` keeps earlier runs) and
its own Redis key namespace. Ctrl-C and SIGTERM stop everything it started, at any point;
with ``--serve`` the stack stays up afterwards and the demo prints how to join it from
another terminal (UI link, simulator URL, Redis namespace, exact commands).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from agent_failover.cli.demo_phases import TASKS, Phase, phases
from agent_failover.cli.demo_webhook import on_call_receiver
from agent_failover.cli.devstack import DevStack, print_left_out, start_stack
from agent_failover.cli.lifecycle import exit_code_for, until_signalled
from agent_failover.cli.local import print_join
from agent_failover.cli.render import TIER_STYLE, steps_table, tier_label
from agent_failover.resilience.contracts import BreakerState
from agent_failover.resilience.pipeline import SUBSTITUTIONS_LEGEND
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    EscalationAction,
    EscalationDecision,
    EscalationState,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
    PipelineStatus,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from agent_failover.workflows.search_attributes import pipeline_summary

#: How long recovery may take before the demo reports it as not restored.
RECOVERY_TIMEOUT_S = 90.0


@dataclass
class Run:
    phase: str
    task: str
    workflow_id: str
    result: PipelineResult | None = None
    error: str | None = None
    seconds: float = 0.0
    escalated: bool = False
    notes: list[str] = field(default_factory=list)


async def _run_pipeline(stack: DevStack, phase: Phase, task: str, console: Console) -> Run:
    wid = f"demo-{phase.name.split()[0]}-{uuid.uuid4().hex[:8]}"
    run = Run(phase.name, task, wid)
    inp = PipelineInput(
        task=task,
        options=PipelineOptions(
            escalate_on_critical_degraded=phase.escalate,
            escalation_timeout_s=120,
            **phase.options,
        ),
    )
    t0 = time.monotonic()
    handle = await stack.client.start_workflow(
        AgentPipelineWorkflow.run,
        inp,
        id=wid,
        task_queue=stack.task_queue,
        result_type=PipelineResult,
        static_summary=pipeline_summary(task),
    )
    result_task = asyncio.create_task(handle.result())
    try:
        await _follow(handle, phase, run, console, result_task)
        run.result = result_task.result()
    except Exception as exc:
        run.error = str(exc)
    finally:
        # A signal stops following; the long poll on the result must not outlive the stack.
        result_task.cancel()
    run.seconds = time.monotonic() - t0
    return run


async def _follow(
    handle, phase: Phase, run: Run, console: Console, result_task: asyncio.Task[Any]
) -> None:
    """Wait for the result; in an escalating phase, play the operator who accepts."""
    while not result_task.done():
        await asyncio.wait([result_task], timeout=0.5)
        if result_task.done() or not phase.escalate:
            continue
        st: PipelineStatus = await handle.query(
            AgentPipelineWorkflow.status, result_type=PipelineStatus
        )
        if st.escalation is EscalationState.PENDING and st.pending_escalation:
            pe = st.pending_escalation
            console.print(
                f"    [magenta]escalation[/] {run.workflow_id}: {pe.reason}; state kept "
                f"({len(pe.completed_steps)} steps done, {len(pe.pending_steps)} pending) "
                "→ operator accepts the degraded answer"
            )
            run.escalated = True
            await handle.execute_update(
                AgentPipelineWorkflow.resolve,
                EscalationDecision(
                    action=EscalationAction.ACCEPT_DEGRADED, operator="demo", note="outage drill"
                ),
            )


def _tiers_seen(runs: list[Run]) -> set[str]:
    seen: set[str] = set()
    for r in runs:
        if r.result:
            for s in r.result.steps:
                seen.add(tier_label(s.output))
    return seen


def _summary_table(runs: list[Run]) -> Table:
    t = Table(title="Demo: every pipeline, by phase", title_justify="left")
    for col in ("phase", "task", "steps by tier", "answered by", "subst.", "conf.", "s", "note"):
        if col == "task":
            t.add_column(col, no_wrap=True, overflow="ellipsis", max_width=30)
        else:
            t.add_column(col, overflow="fold")
    for r in runs:
        if r.result is None:
            t.add_row(r.phase, r.task, "-", "-", "-", "-", f"{r.seconds:.1f}", f"[red]{r.error}[/]")
            continue
        counts: dict[str, int] = {}
        routes: dict[str, int] = {}
        for s in r.result.steps:
            lbl = tier_label(s.output)
            counts[lbl] = counts.get(lbl, 0) + 1
            rt = {"3 static": "static", "3 cache": "cache"}.get(lbl, s.output.route or "-")
            routes[rt] = routes.get(rt, 0) + 1
        tiers = " ".join(
            f"[{TIER_STYLE.get(int(k[0]), 'white')}]{k}×{v}[/]" for k, v in sorted(counts.items())
        )
        t.add_row(
            r.phase,
            r.task,
            tiers,
            ", ".join(f"{k}×{v}" for k, v in routes.items()),
            str(r.result.summary.substitutions),
            f"{r.result.confidence:.2f}",
            f"{r.seconds:.1f}",
            "escalated → accepted" if r.escalated else _rollback_note(r.result),
        )
    return t


def _tool_rollbacks(result: PipelineResult) -> list[str]:
    """Steps of agent tool calls the saga undid (``<step>/<tool>``)."""
    return [e.effect.step for e in result.compensated if "/" in e.effect.step]


def _rollback_note(result: PipelineResult) -> str:
    undone = _tool_rollbacks(result)
    return f"{len(undone)} tool call(s) rolled back" if undone else ""


def saga_table(result: PipelineResult, title: str) -> Table:
    """The run's compensation log: each side effect, what undoes it, where it stands."""
    t = Table(title=title, title_justify="left")
    for col in ("effect", "tool", "object", "undone by", "status"):
        t.add_column(col, overflow="fold")
    log = result.compensation_log
    for e in log.entries if log else []:
        status = e.label()
        style = {"failed": "red", "left": "yellow", "maybe_applied": "yellow"}.get(
            e.status.value, "green" if e.status.value == "compensated" else "white"
        )
        t.add_row(
            e.effect.step,
            e.effect.tool,
            str(e.effect.result.get("id", "-")),
            e.effect.compensation_tool or "-",
            f"[{style}]{status}[/]",
        )
    for a in result.actions:
        if a.status.value == "failed":
            t.add_row(a.step, a.tool, "-", "-", f"[red]failed: {a.error or ''}[/]")
    return t


SUMMARY_LEGEND = (
    SUBSTITUTIONS_LEGEND.replace("substitutions", "subst.", 1)
    + "; conf. = confidence of the answer; s = seconds"
)


async def _wait_recovered(
    stack: DevStack, console: Console, routes: list[str] | None = None
) -> tuple[bool, float]:
    """Wait until the routes' breakers are closed (probes drive half-open trials and
    closing) and no route is still cooling down after a 429."""
    t0 = time.monotonic()
    routes = sorted(routes if routes is not None else stack.policy.endpoints)
    with console.status("waiting for the health monitor's probes to close breakers…") as st:
        while time.monotonic() - t0 < RECOVERY_TIMEOUT_S:
            breakers = {r: await stack.deps.stores.health.breaker(r) for r in routes}
            now = time.time()
            bad = {
                r: b.state.value for r, b in breakers.items() if b.state is not BreakerState.CLOSED
            }
            bad |= {
                r: "cooling down (429)"
                for r, b in breakers.items()
                if b.cooldown_until is not None and b.cooldown_until > now
            }
            if not bad:
                return True, time.monotonic() - t0
            st.update(
                "recovery: probes running; not yet closed: "
                + ", ".join(f"{r}={s}" for r, s in bad.items())
            )
            await asyncio.sleep(1.0)
    return False, time.monotonic() - t0


async def run_demo(
    console: Console,
    *,
    serve: bool = False,
    temporal_port: int = 7233,
    ui_port: int = 8233,
    clean: bool = True,
    verbose: bool = False,
) -> int:
    """Run the demo; returns the process exit code.

    A signal during the phases stops everything and returns 128 + signal; with
    ``serve``, a signal while serving is the normal way out and returns the demo's own
    verdict.
    """
    library = logging.getLogger("agent_failover")
    saved = library.level
    if not verbose:
        # Breaker transitions are what the tables show; as log lines they only interleave.
        library.setLevel(logging.ERROR)
    try:
        code, signum = await until_signalled(
            _demo(console, serve=serve, port=temporal_port, ui_port=ui_port, clean=clean)
        )
    finally:
        library.setLevel(saved)
    if signum is not None:
        name = signal.Signals(signum).name
        console.print(f"demo stopped on {name}: everything it started is down")
    if code is not None:
        return code  # finished (with --serve, a signal is the normal way out)
    return exit_code_for(signum or signal.SIGINT)


async def _demo(console: Console, *, serve: bool, port: int, ui_port: int, clean: bool) -> int:
    with console.status("starting simulator, Temporal dev server (with Web UI), Redis, worker…"):
        # A namespace of its own: health state left in a shared Redis by an earlier (or
        # interrupted) run must not decide this run's routes.
        stack = await start_stack(
            temporal_port=port,
            ui_port=ui_port,
            clean=clean,
            namespace=f"failover-demo-{uuid.uuid4().hex[:8]}",
        )
    try:
        if serve:
            print_join(console, stack, title="The demo's stack (it stays up after the demo):")
        else:
            console.print(
                f"Temporal {stack.address} · Web UI {stack.ui} · simulator {stack.sim.url} · "
                f"store {stack.deps.stores.backend}",
                highlight=False,
            )
        print_left_out(console, stack)
        # The escalations of phase 5 page a local on-call webhook (signed, checked here).
        async with on_call_receiver(stack, console) as on_call:
            code = await _phases_and_checks(stack, console)
            code = code if on_call.check(console) else code or 1
        if serve:
            print_join(console, stack, title="Serving until Ctrl-C or SIGTERM; join it with:")
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                console.print("stopping the demo's stack…")
        return code
    finally:
        await stack.stop()


async def _phases_and_checks(stack: DevStack, console: Console) -> int:
    """Run every phase, print the summary and the self-checks; return 0 if all passed."""
    admin = SimAdmin(stack.sim.url)
    try:
        await admin.reset()
        runs = await _run_phases(stack, console, admin)
        recovered, last = await _recovery(stack, console, admin, runs)
        console.print(_summary_table(runs))
        console.print(f"({SUMMARY_LEGEND})", style="dim", highlight=False)
        attempts = await admin.attempts()
        console.print(f"the simulator received {len(attempts)} attempts in all")
        ok = await _checks(stack, console, runs, recovered, last)
        if not ok:
            console.print("[red]demo check failed[/]")
        return 0 if ok else 1
    finally:
        await admin.aclose()


async def _run_phases(stack: DevStack, console: Console, admin: SimAdmin) -> list[Run]:
    runs: list[Run] = []
    for ph in phases():
        console.rule(f"[bold]{ph.name}[/]: {ph.story}")
        await admin.clear()
        healthy = [r for r in stack.policy.endpoints if r not in ph.faults]
        _, took = await _wait_recovered(stack, console, healthy)
        if took > 1:
            console.print(
                f"  routes back in service after {took:.1f}s of probing: "
                + ", ".join(sorted(healthy))
            )
        for endpoint, faults in ph.faults.items():
            await admin.set_faults(endpoint, faults)
        for tool, faults in ph.tool_faults.items():
            await admin.set_tool_faults(tool, faults)
        for task in ph.tasks:
            run = await _run_pipeline(stack, ph, task, console)
            runs.append(run)
            if run.result:
                console.print(steps_table(run.result, title=f"{run.workflow_id}: {task}"))
                if run.result.compensation_log:
                    console.print(saga_table(run.result, f"{run.workflow_id}: side effects"))
            else:
                console.print(f"[red]{run.workflow_id} failed: {run.error}[/]")
        if ph.tool_faults:
            await admin.clear_tool_faults()
    return runs


async def _recovery(
    stack: DevStack, console: Console, admin: SimAdmin, runs: list[Run]
) -> tuple[bool, Run]:
    console.rule("[bold]6 recovery[/]: faults cleared; probes restore the routes")
    await admin.clear()
    recovered, took = await _wait_recovered(stack, console)
    console.print(f"breakers {'all closed' if recovered else 'NOT all closed'} after {took:.1f}s")
    ph = Phase("6 recovered", "primary restored", {}, [TASKS[1]])
    run = await _run_pipeline(stack, ph, ph.tasks[0], console)
    runs.append(run)
    if run.result:
        console.print(steps_table(run.result, title=f"{run.workflow_id}: after recovery"))
    return recovered, run


async def _checks(
    stack: DevStack, console: Console, runs: list[Run], recovered: bool, last: Run
) -> bool:
    seen = _tiers_seen(runs)
    missing = {"0", "1", "2", "3 cache", "3 static"} - seen
    failed = [r for r in runs if r.result is None]
    restored = bool(last.result) and all(s.output.tier == 0 for s in last.result.steps)
    console.print(
        f"tiers seen: {', '.join(sorted(seen))}"
        + (f" · [red]missing {sorted(missing)}[/]" if missing else " · [green]all tiers[/]")
    )
    degraded_runs = [
        w.id
        async for w in stack.client.list_workflows(
            "WorkflowType = 'AgentPipelineWorkflow' AND Degraded = true "
            "AND WorkflowId STARTS_WITH 'demo-'"
        )
    ]
    expected = {r.workflow_id for r in runs if r.result and r.result.degraded}
    filter_ok = expected <= set(degraded_runs)
    console.print(
        f"visibility filter [bold]Degraded = true[/] finds {len(expected & set(degraded_runs))}"
        f" of the {len(expected)} degraded runs of this demo"
        + ("" if filter_ok else " [red](visibility lagging or attributes missing)[/]")
    )
    if stack.ui:
        console.print(
            f"Temporal UI: {stack.ui}/namespaces/default/workflows  — filter: "
            "[bold]Degraded = true[/] or [bold]WorstTier >= 2[/]"
        )
    rollback = [r for r in runs if r.phase.startswith("1b")]
    rolled_back = all(r.result and _tool_rollbacks(r.result) for r in rollback)
    console.print(
        "saga: a specialist's tool call was "
        + ("[green]rolled back[/]" if rolled_back else "[red]NOT rolled back[/]")
        + " after the later action failed"
    )
    return not missing and not failed and recovered and restored and filter_ok and rolled_back
