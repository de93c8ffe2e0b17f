"""``failover run``: start one pipeline, follow it, print the answer and its provenance.

Input is validated locally first (``field: message`` lines, exit 2). Before anything is
started, a worker must poll the task queue; if the run's first status query still gets
no answer within :data:`~agent_failover.cli.ops.ANSWER_TIMEOUT_S` (a worker that died a
moment ago still looks alive), the run is terminated and the command says why, rather
than leaving a pipeline nobody will pick up. Ctrl-C leaves the pipeline running on the
server and says where to find it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

from rich.console import Console
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.service import RPCError

from agent_failover.cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    CliError,
    describe,
    validation_lines,
)
from agent_failover.cli.ops import ANSWER_TIMEOUT_S, answer_timeout, require_worker

#: How often the progress line is refreshed.
PROGRESS_EVERY_S = 0.5


def build_input(task: str, no_escalate: bool, suppress_degraded: bool):
    """The pipeline input, or exit 2 with one ``field: message`` line per problem."""
    from pydantic import ValidationError

    from agent_failover.workflows.models import PipelineInput, PipelineOptions

    try:
        return PipelineInput(
            task=task,
            options=PipelineOptions(
                escalate_on_critical_degraded=not no_escalate,
                suppress_degraded_sections=suppress_degraded,
            ),
        )
    except ValidationError as exc:
        raise CliError("\n".join(validation_lines(exc)), EXIT_BAD_INPUT) from None


async def run_pipeline(
    console: Console, client: Client, inp, task_queue: str, address: str | None
) -> None:
    """Start, follow and print one pipeline."""
    from agent_failover.workflows.models import PipelineResult
    from agent_failover.workflows.pipeline import AgentPipelineWorkflow
    from agent_failover.workflows.search_attributes import pipeline_summary

    await require_worker(client, task_queue)
    wid = f"pipeline-{uuid.uuid4().hex[:12]}"
    handle = await client.start_workflow(
        AgentPipelineWorkflow.run,
        inp,
        id=wid,
        task_queue=task_queue,
        result_type=PipelineResult,
        static_summary=pipeline_summary(inp.task),
    )
    link = _ui_link(address, client.namespace, wid)
    console.print(f"started {wid} on task queue {task_queue}", highlight=False)
    try:
        result = await _follow(console, handle, task_queue)
    except asyncio.CancelledError:
        # Ctrl-C stops following, not the pipeline: say where it goes on.
        raise CliError(
            f"interrupted: pipeline {wid} keeps running on the server; {link or 'see the UI'}",
            EXIT_INTERRUPTED,
        ) from None
    except WorkflowFailureError as exc:
        raise CliError(f"pipeline {wid} {describe(exc).removeprefix('the workflow ')}") from None
    _print_result(console, result)
    if link:
        console.print(link, highlight=False)


def _ui_link(address: str | None, namespace: str, wid: str) -> str:
    from agent_failover.cli.stackfile import ui_url
    from agent_failover.connect import connect_config

    ui = ui_url(address or connect_config()["target_host"])
    return f"Temporal UI: {ui}/namespaces/{namespace}/workflows/{wid}" if ui else ""


async def _follow(console: Console, handle: WorkflowHandle, task_queue: str):
    """Wait for the result, showing phase and step counts as the run goes."""
    from agent_failover.workflows.models import PipelineStatus
    from agent_failover.workflows.pipeline import AgentPipelineWorkflow

    started = time.monotonic()
    result_task = asyncio.create_task(handle.result())
    answered = False
    paused: str | None = None
    try:
        with console.status("starting") as st:
            while not result_task.done():
                try:
                    s: PipelineStatus = await handle.query(
                        AgentPipelineWorkflow.status,
                        result_type=PipelineStatus,
                        rpc_timeout=timedelta(seconds=ANSWER_TIMEOUT_S),
                    )
                    answered = True
                    paused = _announce_pause(console, handle.id, s, paused)
                    st.update(
                        f"{s.phase} · {len(s.completed_steps)} steps done · "
                        f"{s.summary.substitutions} substituted · escalation "
                        f"{s.escalation.value} · {time.monotonic() - started:.1f}s"
                    )
                except (RPCError, RPCTimeoutOrCancelledError):
                    if not answered and time.monotonic() - started > ANSWER_TIMEOUT_S:
                        await handle.terminate("failover run: no worker answered")
                        raise answer_timeout("the new pipeline", task_queue) from None
                except Exception:
                    # A query may fail while the run closes; the result tells the rest.
                    if result_task.done():
                        break
                await asyncio.wait([result_task], timeout=PROGRESS_EVERY_S)
        return await result_task
    finally:
        if not result_task.done():
            result_task.cancel()


def _announce_pause(console: Console, wid: str, s, announced: str | None) -> str | None:
    """Print once per escalation how to answer it; return the step now announced."""
    pe = s.pending_escalation
    if pe is None or pe.step == announced:
        return announced if pe is not None else None
    console.print(
        f"paused for a human at step {pe.step}: {pe.reason}. Answer with: failover resolve "
        f"{wid} retry|accept_degraded|abort (or provide_output --output TEXT)",
        highlight=False,
        soft_wrap=True,
    )
    return pe.step


def _print_result(console: Console, result) -> None:
    from agent_failover.cli.render import steps_table
    from agent_failover.resilience.pipeline import SUBSTITUTIONS_LEGEND

    console.rule("answer")
    console.print(result.answer, markup=False)
    console.print(steps_table(result))
    s = result.summary
    console.print(
        f"confidence {result.confidence:.2f} · substitutions {s.substitutions} of "
        f"{len(result.steps)} steps · failed attempts {s.failed_attempts} · worst tier "
        f"{s.worst_tier} · degraded steps {len(s.degraded_steps)}",
        highlight=False,
    )
    console.print(f"({SUBSTITUTIONS_LEGEND})", highlight=False, style="dim")
