"""The failover search attributes, and one call that keeps them current from any workflow.

``FailoverCount`` (steps that did not get their tier-0 answer), ``WorstTier`` (0-3),
``Degraded`` (some step got less than a full-capability answer; see ``Capability``) and
``EscalationState`` (``none``/``pending``/...) make every run filterable in the Temporal
UI, e.g. ``Degraded = true`` or ``EscalationState = "pending"``; ``RevisionState`` is set
by a pipeline that re-ran degraded steps (``RevisionState = "revised"``). Our pipeline upserts
them; a user's workflow does the same with::

    outputs.append(await resilient_complete("analyst", request))
    upsert_failover_search_attributes(outputs)

The namespace must know the attributes first: :func:`register_search_attributes` (once
per namespace; ``failover dev`` and the test servers do it), or
``temporal operator search-attribute create`` as in docker-compose.yml.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.contracts import AgentOutput
    from agent_failover.resilience.details import step_table
    from agent_failover.resilience.pipeline import FailoverSummary, summarize

FAILOVER_COUNT = SearchAttributeKey.for_int("FailoverCount")
WORST_TIER = SearchAttributeKey.for_int("WorstTier")
DEGRADED = SearchAttributeKey.for_bool("Degraded")
ESCALATION_STATE = SearchAttributeKey.for_keyword("EscalationState")
#: Degraded re-runs of the run (``pending`` while waiting for a primary, then the worst
#: outcome: ``escalated``, ``revised``, ``failed`` or ``expired``); unset without re-runs.
REVISION_STATE = SearchAttributeKey.for_keyword("RevisionState")
#: Every key, for registering them on a namespace or a dev server.
SEARCH_ATTRIBUTES = (FAILOVER_COUNT, WORST_TIER, DEGRADED, ESCALATION_STATE, REVISION_STATE)


def upsert_failover_search_attributes(
    outputs: Iterable[AgentOutput] | FailoverSummary,
    *,
    escalation_state: str = "none",
) -> FailoverSummary:
    """Upsert the four attributes from a workflow's answers so far; returns the summary.

    Call from workflow code after each ``resilient_complete`` (or once at the end).
    Given the answers, it also keeps the run's current details (the markdown step table
    the Temporal UI shows) up to date. ``outputs`` may also be a precomputed
    :class:`FailoverSummary` (then the details are the caller's: :func:`set_failover_details`).
    """
    if isinstance(outputs, FailoverSummary):
        summary = outputs
    else:
        steps = [(f"{i + 1}. {out.role}", out) for i, out in enumerate(outputs)]
        summary = summarize(steps)
        set_failover_details(steps, summary, escalation_state=escalation_state)
    workflow.upsert_search_attributes(
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


def search_attribute_types() -> dict[str, Any]:
    """Name -> indexed value type of every attribute, as the operator service takes them."""
    return {k.name: k._indexed_value_type for k in SEARCH_ATTRIBUTES}


async def register_search_attributes(client: Client) -> list[str]:
    """Add the attributes to the client's namespace; returns the names it had to add.

    Idempotent: attributes already present are left alone. Needs operator rights (the
    dev server grants them; on Temporal Cloud create them in the UI or with tcld).
    """
    from temporalio.api.operatorservice.v1 import (
        AddSearchAttributesRequest,
        ListSearchAttributesRequest,
    )

    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    present = set(listed.custom_attributes)
    missing = {n: t for n, t in search_attribute_types().items() if n not in present}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )
    return sorted(missing)
