"""Waiting in a test for a run to escalate (``escalate(...)`` or the pipeline's steps)."""

from __future__ import annotations

import asyncio

from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowQueryFailedError

from agent_failover.workflows.models import EscalationStatus


class NoEscalationError(AssertionError):
    """The run ended, or the wait ran out, without a pending escalation."""


async def wait_for_escalation(
    handle: WorkflowHandle, *, timeout_s: float = 30.0, poll_s: float = 0.1
) -> EscalationStatus:
    """The run's ``escalation`` query once a human is asked; raises
    :class:`NoEscalationError` (with the run's own failure, if it failed) when the run
    ends first or nothing is pending within ``timeout_s`` of wall time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            try:
                await handle.result()
            except Exception as err:  # the run's failure says why it never escalated
                raise NoEscalationError(f"{handle.id} ended without escalating: {err}") from err
            raise NoEscalationError(f"{handle.id} completed without escalating")
        try:
            st = await handle.query("escalation", result_type=EscalationStatus)
        except WorkflowQueryFailedError:  # registered at the run's first escalation
            st = None
        if st is not None and st.pending_escalation is not None:
            return st
        await asyncio.sleep(poll_s)
    raise NoEscalationError(f"{handle.id} did not escalate within {timeout_s:.0f} s")
