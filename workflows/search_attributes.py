"""The failover search attributes, and one call that keeps them current from any workflow.

``FailoverCount`` (steps that did not get their tier-0 answer), ``WorstTier`` (0-3),
``Degraded`` (some step got less than a full-capability answer; see ``Capability``) and
``EscalationState`` (``none``/``pending``/...) make every run filterable in the Temporal
UI, e.g. ``Degraded = true`` or ``EscalationState = "pending"``; ``RevisionState`` is set
by a pipeline that re-ran degraded steps (``RevisionState = "revised"``). Our pipeline upserts
them; a user's workflow does the same with::

    outputs.append(await resilient_complete("analyst", request))
    upsert_failover_search_attributes(outputs)

The namespace must know the attributes first: :class:`~agent_failover.FailoverPlugin`
checks when its worker starts (registering them on a local dev server, else refusing to
start with the ``temporal operator search-attribute create`` command), or
:func:`register_search_attributes` once per namespace. Should a run find its namespace
without them (a worker started with ``search_attributes="warn"``), the upserts are
skipped for that run: it goes on, the ``failover.search_attributes.skipped`` metric counts
it and the worker logs one warning, instead of failing its workflow task at every retry.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.search_attributes import (
        DEGRADED,
        ESCALATION_STATE,
        FAILOVER_COUNT,
        REVISION_STATE,
        SEARCH_ATTRIBUTES,
        WORST_TIER,
        first_warning,
        known_missing,
        register_search_attributes,
        search_attribute_types,
    )
    from agent_failover.resilience.contracts import AgentOutput
    from agent_failover.resilience.details import step_table
    from agent_failover.resilience.pipeline import FailoverSummary, summarize
    from agent_failover.telemetry import names
    from agent_failover.telemetry.instruments import instruments
    from agent_failover.workflows.patches import SEARCH_ATTRIBUTES_MISSING

__all__ = [
    "DEGRADED",
    "ESCALATION_STATE",
    "FAILOVER_COUNT",
    "REVISION_STATE",
    "SEARCH_ATTRIBUTES",
    "WORST_TIER",
    "pipeline_summary",
    "register_search_attributes",
    "search_attribute_types",
    "set_failover_details",
    "upsert_failover_search_attributes",
    "upsert_if_available",
]

#: Per run (its workflow instance): whether its upserts are skipped. Decided once, at the
#: run's first upsert, so every later task and every replay decides the same.
_skipping: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _skips_upserts() -> bool:
    """Whether this run skips its search-attribute upserts (its namespace lacks them).

    The decision is recorded in history as the marker ``SEARCH_ATTRIBUTES_MISSING``
    (``workflow.patched`` records it when not replaying): a replay reads the marker, not
    what this process believes about the namespace today, so it emits what the first run
    emitted.
    """
    run = workflow.instance()
    try:
        if run in _skipping:
            return _skipping[run]
    except TypeError:  # an instance without weak references: decided at each call
        run = None
    namespace = workflow.info().namespace
    skip = False
    if workflow.unsafe.is_replaying() or known_missing(namespace):
        skip = workflow.patched(SEARCH_ATTRIBUTES_MISSING)
    if run is not None:
        _skipping[run] = skip
    if skip and not workflow.unsafe.is_replaying():
        instruments().search_attributes_skipped.add(1, {"namespace": namespace})
        if first_warning(namespace):
            workflow.logger.warning(
                "namespace %r lacks the failover search attributes: upserts skipped "
                "(metric %s); create them with `temporal operator search-attribute create`",
                namespace,
                names.SEARCH_ATTRIBUTES_SKIPPED,
            )
    return skip


def upsert_if_available(updates: Sequence[SearchAttributeUpdate[Any]]) -> bool:
    """``workflow.upsert_search_attributes(updates)`` unless this run skips its upserts
    (its namespace lacks the attributes); returns whether it upserted."""
    if _skips_upserts():
        return False
    workflow.upsert_search_attributes(updates)
    return True


def upsert_failover_search_attributes(
    outputs: Iterable[AgentOutput] | FailoverSummary,
    *,
    escalation_state: str | None = None,
) -> FailoverSummary:
    """Upsert the four attributes from a workflow's answers so far; returns the summary.

    Call from workflow code after each ``resilient_complete`` (or once at the end).
    ``EscalationState`` is ``escalation_state`` when given, else the run's own (what
    :func:`~agent_failover.escalate` set), else ``none``.
    Given the answers, it also keeps the run's current details (the markdown step table
    the Temporal UI shows) up to date. ``outputs`` may also be a precomputed
    :class:`FailoverSummary` (then the details are the caller's: :func:`set_failover_details`).
    """
    if escalation_state is None:
        esc = getattr(workflow.instance(), "_failover_escalation", None)
        escalation_state = esc.desk.state.value if esc is not None else "none"
    if isinstance(outputs, FailoverSummary):
        summary = outputs
    else:
        steps = [(f"{i + 1}. {out.role}", out) for i, out in enumerate(outputs)]
        summary = summarize(steps)
        set_failover_details(steps, summary, escalation_state=escalation_state)
    upsert_if_available(
        [
            FAILOVER_COUNT.value_set(summary.failover_count),
            WORST_TIER.value_set(summary.worst_tier),
            DEGRADED.value_set(bool(summary.degraded_steps)),
            ESCALATION_STATE.value_set(str(escalation_state)),
        ]
    )
    return summary


#: Characters of the task shown in a run's static summary (the UI shows one line).
SUMMARY_TASK_CHARS = 160


def pipeline_summary(task: str) -> str:
    """The static summary to start a pipeline with (``start_workflow(static_summary=...)``):
    what it was asked; how it went (worst tier, steps) is in its current details."""
    text = " ".join(task.split())
    if len(text) > SUMMARY_TASK_CHARS:
        text = text[: SUMMARY_TASK_CHARS - 1] + "…"
    return f"pipeline: {text}"


def set_failover_details(
    steps: Iterable[tuple[str, AgentOutput]],
    summary: FailoverSummary | None = None,
    *,
    escalation_state: str = "none",
    phase: str | None = None,
) -> None:
    """Show the run's steps (tier, route, reason codes, latency) as markdown in the
    Temporal UI (``workflow.set_current_details``). Call from workflow code."""
    steps = list(steps)
    summary = summary if summary is not None else summarize(steps)
    workflow.set_current_details(
        step_table(steps, summary, escalation=escalation_state, phase=phase)
    )
