"""``Saga``: compensations for any workflow's side effects, undone newest first on failure.

Workflow code registers a compensation (an activity and its input, with its own retry
policy and timeout) after each side effect that succeeded::

    from agent_failover.saga import Saga

    saga = Saga()
    saga.attach_query()  # the log, as the "compensation_log" query
    async with saga:  # a failure or a cancellation below compensates, then re-raises
        ticket = await workflow.execute_activity(open_ticket, req, ...)
        saga.add(close_ticket, ticket.id, step="ticket", tool="open_ticket", args=req_dict)
        await workflow.execute_activity(charge_card, ...)  # fails -> close_ticket runs

A failure (any ``temporalio.exceptions.FailureError``: ``ApplicationError``,
``ActivityError``, ...) or a cancellation triggers them; a bug in workflow code (a
``TypeError``) does not, since Temporal retries that task. Compensations run in reverse,
each with its own retry policy; one that still fails is
marked ``failed`` in the log and the rest still run. When any failed, the saga raises
``ApplicationError(type="COMPENSATION_FAILED")`` carrying the failed entries, so the run
ends with that reason (non-retryable) instead of dropping them. Compensation runs in a
task of its own behind ``asyncio.shield``: a workflow cancellation cannot interrupt it.
An operator's abort is ``await saga.compensate()`` before failing the run.

An effect whose activity failed *ambiguously* (timeout, or a retryable error after its
last attempt: :func:`maybe_applied_failure`) may still have been applied: register it
with ``saga.add(..., maybe_applied=True)`` and its compensation — keyed by the effect's
idempotency key, since no id came back — runs on rollback like any other. A compensation
that answers "nothing to undo" (``result["nothing_applied"]``, a 404 from the tool
server) counts as ``compensated (nothing applied)``.

The log is :class:`resilience.saga.CompensationLog` (pure values); the activity references
live only in workflow memory, rebuilt on replay like any workflow state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.saga import (
        CompensationEntry,
        CompensationLog,
        CompensationStatus,
        SideEffect,
        failure_may_have_applied,
        idempotency_key,
    )
    from agent_failover.workflows import observe

#: Error type of a run whose compensations could not all complete.
COMPENSATION_FAILED = "COMPENSATION_FAILED"
#: Name of the query :meth:`Saga.attach_query` adds by default.
COMPENSATION_LOG_QUERY = "compensation_log"
#: Retries of one compensation unless the registration says otherwise.
DEFAULT_COMPENSATION_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
)
DEFAULT_COMPENSATION_TIMEOUT = timedelta(seconds=30)

#: Result field of a compensation that found nothing to undo.
NOTHING_APPLIED = "nothing_applied"

_NO_ARG = object()


@dataclass
class _Undo:
    activity: Callable[..., Any] | str
    arg: Any
    retry_policy: RetryPolicy
    timeout: timedelta


def workflow_idempotency_key(step: str, tool: str, args: dict[str, Any]) -> str:
    """:func:`resilience.saga.idempotency_key` with the current workflow's id."""
    return idempotency_key(workflow.info().workflow_id, step, tool, args)


def maybe_applied_failure(exc: ActivityError, non_retryable_types: Any = ()) -> bool:
    """Whether the effect behind the failed activity ``exc`` may have been applied.

    A timeout, a cancellation or a retryable error (attempts exhausted) is ambiguous; a
    non-retryable ``ApplicationError`` (flagged, or of a type in ``non_retryable_types``,
    the retry policy's list) is the tool declaring "not applied".
    """
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        declared = cause.non_retryable or (cause.type or "") in set(non_retryable_types or ())
        return failure_may_have_applied(
            timed_out=False, error_type=cause.type, non_retryable=declared
        )
    return failure_may_have_applied(
        timed_out=isinstance(cause, ActivityTimeoutError), error_type=None, non_retryable=False
    )


def nothing_applied(result: Any) -> bool:
    """Whether a compensation's return value says it found nothing to undo."""
    body = result.get("result", result) if isinstance(result, dict) else None
    if body is None:
        body = getattr(result, "result", None)
    return isinstance(body, dict) and body.get(NOTHING_APPLIED) is True


class Saga:
    """A compensation log for one workflow run, with the activities that undo it."""

    def __init__(self, log: CompensationLog | None = None) -> None:
        self.log = log if log is not None else CompensationLog()
        self._undo: dict[str, _Undo] = {}

    def key(self, step: str, tool: str, args: dict[str, Any]) -> str:
        """Idempotency key of ``tool(args)`` at ``step`` of this workflow (pass it to the tool)."""
        return workflow_idempotency_key(step, tool, args)

    def add(
        self,
        compensation: Callable[..., Any] | str,
        arg: Any = _NO_ARG,
        *,
        step: str,
        tool: str | None = None,
        args: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
        key: str | None = None,
        compensation_name: str | None = None,
        compensation_args: dict[str, Any] | None = None,
        retry_policy: RetryPolicy | None = None,
        start_to_close_timeout: timedelta | None = None,
        maybe_applied: bool = False,
    ) -> CompensationEntry:
        """Register the undo of a side effect that just succeeded (or ``maybe_applied``).

        ``compensation`` is an activity (reference, or a name) run with ``arg``;
        ``step``/``tool``/``args`` identify the effect (its key defaults to
        :meth:`key`), ``result`` is what it returned, for the log. With
        ``maybe_applied`` the effect's call failed ambiguously: ``arg`` must name the
        effect by its idempotency key, and "not found" must count as success.
        """
        name = compensation_name or _activity_name(compensation)
        effect = SideEffect(
            step=step,
            tool=tool or step,
            args=dict(args or {}),
            idempotency_key=key or self.key(step, tool or step, dict(args or {})),
            compensation_tool=name,
            compensation_args=dict(compensation_args or {}),
            result=dict(result or {}),
        )
        entry = self.log.append(effect, maybe_applied=maybe_applied)
        self._undo[effect.idempotency_key] = _Undo(
            compensation,
            arg,
            retry_policy or DEFAULT_COMPENSATION_RETRY,
            start_to_close_timeout or DEFAULT_COMPENSATION_TIMEOUT,
        )
        return entry

    def attach_query(self, name: str = COMPENSATION_LOG_QUERY) -> None:
        """Expose the log as a query (``temporal workflow query --type compensation_log``)."""
        workflow.set_query_handler(name, lambda: self.log)

    @property
    def pending(self) -> list[CompensationEntry]:
        """Effects still to undo, newest first."""
        return [e for e in self.log.to_compensate() if e.effect.idempotency_key in self._undo]

    async def compensate(self) -> list[CompensationEntry]:
        """Undo every outstanding effect newest first; returns the ones undone.

        Runs shielded from cancellation. Raises ``COMPENSATION_FAILED`` (after every
        other compensation ran) when any could not complete.
        """
        task = asyncio.ensure_future(self._run_all())
        while True:
            try:
                done = await asyncio.shield(task)
                break
            except asyncio.CancelledError:
                if task.done():
                    raise
                # The run is being cancelled: finish undoing first, then let it end.
                workflow.logger.info("cancellation while compensating; compensation continues")
        failed = self.log.with_status(CompensationStatus.FAILED)
        if failed:
            raise compensation_failed(failed)
        return done

    async def __aenter__(self) -> Saga:
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        # A run failure (ApplicationError, ActivityError, ...) or a cancellation undoes; a
        # bug in workflow code (TypeError, ...) does not: Temporal retries that task, and
        # fixed code must replay without compensations the buggy code scheduled.
        if isinstance(exc, FailureError | asyncio.CancelledError) and self.pending:
            await self.compensate()
        return False

    async def _run_all(self) -> list[CompensationEntry]:
        done: list[CompensationEntry] = []
        for entry in self.pending:
            eff = entry.effect
            undo = self._undo[eff.idempotency_key]
            args = () if undo.arg is _NO_ARG else (undo.arg,)
            try:
                ret = await workflow.execute_activity(
                    undo.activity,
                    *args,
                    start_to_close_timeout=undo.timeout,
                    retry_policy=undo.retry_policy,
                    summary=f"compensate {eff.step}: {eff.compensation_tool}",
                )
            except ActivityError as exc:
                error = _cause(exc)
                self.log.mark_failed(eff.idempotency_key, error)
                observe.compensation("failed", eff.step, eff.compensation_tool or "", error)
                continue
            entry = self.log.mark_compensated(
                eff.idempotency_key, nothing_applied=nothing_applied(ret)
            )
            done.append(entry.model_copy(deep=True))
            observe.compensation("run", eff.step, eff.compensation_tool or "")
        return done


def compensation_failed(entries: list[CompensationEntry]) -> ApplicationError:
    """The failure of a run whose compensations in ``entries`` could not complete."""
    what = "; ".join(f"{e.effect.step} ({e.effect.compensation_tool}): {e.error}" for e in entries)
    return ApplicationError(
        f"{len(entries)} compensation(s) could not complete: {what}",
        [e.model_dump(mode="json") for e in entries],
        type=COMPENSATION_FAILED,
        non_retryable=True,
    )


def _activity_name(activity: Callable[..., Any] | str) -> str:
    if isinstance(activity, str):
        return activity
    defn = getattr(activity, "__temporal_activity_definition", None)
    return getattr(defn, "name", None) or getattr(activity, "__name__", repr(activity))


def _cause(exc: ActivityError) -> str:
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return f"{cause.type}: {cause.message}"
    return f"{type(cause).__name__}: {cause}" if cause else str(exc)
