"""What a run shows in the Temporal UI and to queries: search attributes, details, history.

For workflow code and operators' tools. :func:`upsert_failover_search_attributes` keeps
``FailoverCount``, ``WorstTier``, ``Degraded`` and ``EscalationState`` current on any
workflow (and its step table as the run's current details, :func:`set_failover_details`),
returning the :class:`FailoverSummary`; :func:`register_search_attributes` adds
:data:`SEARCH_ATTRIBUTES` to a namespace once; :func:`pipeline_summary` is a run's static
summary. The pipeline's ``failover_history`` query answers a list of :class:`StepHistory`,
each with its :class:`AttemptView` rows::

    outputs.append(await resilient_complete("analyst", request))
    upsert_failover_search_attributes(outputs)
"""

from agent_failover.resilience.pipeline import FailoverSummary
from agent_failover.workflows.models import AttemptView, StepHistory
from agent_failover.workflows.search_attributes import (
    SEARCH_ATTRIBUTES,
    pipeline_summary,
    register_search_attributes,
    set_failover_details,
    upsert_failover_search_attributes,
)

__all__ = [
    "SEARCH_ATTRIBUTES",
    "AttemptView",
    "FailoverSummary",
    "StepHistory",
    "pipeline_summary",
    "register_search_attributes",
    "set_failover_details",
    "upsert_failover_search_attributes",
]
