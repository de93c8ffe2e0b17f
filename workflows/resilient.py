"""``resilient_complete``: one agent call run through its failover plan, from workflow code.

Any workflow can ``await resilient_complete(role, request)``. Each attempt is its own
``call_model`` activity (so the Temporal UI shows one activity per route tried, with its
outcome); decisions come from :mod:`resilience` with values recorded in history, so
replay is deterministic. After the live tiers come the cache and the static fallback:
by default the call returns an :class:`AgentOutput` and never raises for a provider
failure; ``CallOptions(on_exhausted="raise")`` raises :class:`FailoverExhausted` instead.
A content-filter refusal comes back as a typed refusal (``output.refusal``) unless the
role (or the call) opts in to ``content_filter: failover``.

Importing this module is cheap (a workflow file imports it): the loop itself, with the
policy models and the activities it schedules, lives in :mod:`workflows.resilient_loop`,
imported on the first call (workers have loaded it already: :mod:`agent_failover.plugin`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

if TYPE_CHECKING:
    from agent_failover.resilience.contracts import AgentOutput, ReasonCode
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.options import CallOptions

__all__ = ["resilient_complete"]


async def resilient_complete(
    role: str,
    request: ChatRequest,
    *,
    options: CallOptions | None = None,
    upstream_reasons: list[ReasonCode] | None = None,
) -> AgentOutput:
    """Run ``request`` for ``role`` through its failover plan and return the answer.

    Call it from workflow code. The result carries its degradation contract: capability,
    tier, route, model, reason codes, confidence, usage, the answering route's tool calls
    and finish reason, and every attempt (with the provider's status, error code and
    Retry-After for failed ones). ``options`` overrides the role's policy for this call
    (deadline, roster, exhaustion behaviour, content-filter handling);
    ``upstream_reasons`` marks the answer as resting on degraded inputs.

    Raises :class:`FailoverExhausted` only with ``on_exhausted="raise"``, and a
    non-retryable ``ApplicationError`` (type ``policy_error``) for an unknown role or route.
    """
    # Imported here, not at the top: see the module docstring. Passed through (as every
    # worker configures our package), this is a lookup of a loaded module; under a sandbox
    # that re-imports our code (the strict replay) it loads once per run, and the sandbox's
    # "imported after initial workflow load" warning is meant for user code, not this.
    with workflow.unsafe.sandbox_import_notification_policy(
        workflow.SandboxImportNotificationPolicy.SILENT
    ):
        from agent_failover.workflows.resilient_loop import complete

    return await complete(role, request, options, upstream_reasons)
