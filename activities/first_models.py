"""What a call's first attempt's activity (``first_call``) takes and returns: pydantic
models, no IO imports (workflows import them directly, like :mod:`activities.models`).

The activity reads the call's role context and, when the first attempt is plain
(:mod:`resilience.first_attempt`), runs it: its result is the context plus that attempt's
route, tier and answer; a failed attempt raises the ``call_model`` error with a
:class:`FirstCallResult` (the context, route and tier, no answer) as its second detail.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field, field_serializer, model_serializer

from agent_failover.activities.models import (
    CacheWrite,
    CallModelInput,
    CallModelResult,
    HeldLease,
    RoleContext,
    without_default_fields,
)
from agent_failover.resilience.config import RolePolicy
from agent_failover.resilience.models import ChatRequest
from agent_failover.resilience.options import CallOptions
from agent_failover.resilience.plan import PlannedAttempt

__all__ = [
    "ATTEMPT_GRACE",
    "SAME_ROUTE_BACKOFF_S",
    "FirstCallInput",
    "FirstCallResult",
    "attempt_input",
    "context_detail",
]

#: Backoff before the same-route retry of a RETRY-class failure (a 500): Temporal's
#: ``initial_interval`` for ``call_model``, and the workflow's timer after ``first_call``.
SAME_ROUTE_BACKOFF_S = 0.2
#: Time Temporal allows an attempt's activity beyond the attempt's own timeout (its
#: start-to-close); ``first_call`` runs an attempt only when its timeout leaves this much.
ATTEMPT_GRACE = timedelta(seconds=2)


class FirstCallInput(BaseModel):
    """A call with no role context yet: what its first attempt's activity plans from."""

    role: str
    #: The caller's request (before the role's prompt and schema), bounded for history.
    request: ChatRequest
    options: CallOptions | None = None
    #: A per-call roster override's routes (``CallOptions.roster``); None: the role's roster.
    routes: list[str] | None = None
    #: The call's trial ticket (``workflow.random()``, drawn before scheduling).
    ticket: float = Field(ge=0.0, le=1.0)
    #: Workflow time when the call started (and scheduled this activity).
    now: float
    #: The calling workflow's task queue: the attempt runs here only when the role's
    #: attempts go to it (eager dispatch).
    workflow_queue: str

    @field_serializer("request", when_used="json")
    def _request_without_defaults(self, request: ChatRequest) -> Any:
        return request.model_dump(mode="json", exclude_defaults=True)

    @model_serializer(mode="wrap", when_used="json")
    def _compact(self, handler: Any) -> Any:
        return without_default_fields(self, handler(self))


class FirstCallResult(BaseModel):
    """The role context the activity read; with the first attempt's route, tier and answer
    when it ran one (``route`` None: the workflow plans and schedules the attempt)."""

    context: RoleContext
    #: The workflow time the activity planned at (its input's ``now``), as recorded: the
    #: workflow plans its first round and dates that attempt by it. Read back from history,
    #: it stays what it was on replay, where the workflow's clock right after a local
    #: activity can read a workflow task earlier than it ran.
    planned_at: float
    route: str | None = None
    tier: int = Field(default=0, ge=0, le=2)
    result: CallModelResult | None = None
    #: Temporal's try that returned: 2 when the first was retried (a retried try returns
    #: the context only; the Temporal UI shows the first).
    tries: int = Field(default=1, ge=1)
    #: A failed attempt Temporal would retry on its route (a 500, a short Retry-After):
    #: after this many seconds. ``first_call`` fails for good (the workflow runs that retry
    #: as a ``call_model`` with the one try left, after a timer); None: no retry.
    retry_in_s: float | None = Field(default=None, ge=0.0)

    @model_serializer(mode="wrap", when_used="json")
    def _compact(self, handler: Any) -> Any:
        return without_default_fields(self, handler(self))


def attempt_input(
    role_name: str,
    role: RolePolicy,
    attempt: PlannedAttempt,
    request: ChatRequest,
    *,
    output_schema: dict[str, Any] | None,
    now: float,
    started_at: float,
    cache_key: str | None,
    lease: HeldLease | None,
) -> CallModelInput:
    """``call_model``'s input for ``attempt`` of a call of ``role`` (its options applied)
    that started at ``started_at``, scheduled at ``now``: the attempt's budgets, the role's
    deadline and reply bound, and a cache write under ``cache_key`` (None: none). The
    workflow's attempts and ``first_call``'s are built here alike."""
    cache = None
    if cache_key is not None:
        # Kept until the oldest age the degraded tier may serve, not just while fresh.
        cache = CacheWrite(key=cache_key, keep_s=role.roster.cache.max_staleness_s)
    return CallModelInput(
        role=role_name,
        route=attempt.route,
        request=request,
        output_schema=output_schema,
        ttft_budget_ms=attempt.ttft_budget_ms,
        idle_budget_ms=attempt.idle_budget_ms,
        timeout_ms=attempt.timeout_ms,
        now=now,
        deadline_at=started_at + role.total_budget_ms / 1000,
        max_reply_bytes=role.max_reply_bytes,
        cache=cache,
        lease=lease,
    )


def context_detail(details: list[Any] | tuple[Any, ...]) -> FirstCallResult | None:
    """The :class:`FirstCallResult` a failed ``first_call`` carries as its second detail
    (None when it carries none: a timeout, or a failure before the context was read)."""
    if len(details) < 2 or not isinstance(details[1], dict) or "context" not in details[1]:
        return None
    return FirstCallResult.model_validate(details[1])
