"""What a call's first attempt is, decided where its role context is read (pure).

A resilient call with no role context to reuse used to read one (a local activity), plan,
then schedule its first attempt. New runs send the call to its first attempt's activity
instead (``first_call``): the activity reads the context, plans from it with the same
functions the workflow plans with, and when the first attempt is *plain* runs it at once,
returning the context with the answer (or failing with the context in the error); any
other first attempt is left to the workflow, which gets the context only.

Plain means nothing the workflow must do first: the plan starts with a live attempt that
waits for no Retry-After, needs no triage or summary, is no live-tier floor attempt and has
no hedge beside it, on a request that fits one activity input uncut. The workflow plans
again from the context the activity returned (the same pure inputs: same plan) and takes
the answer as that plan's first attempt's.

The request as each route gets it (:func:`role_request`, :func:`prompted`), what it is
validated against (:func:`output_schema_for`) and whether a full answer is cached
(:func:`caches_answer`) are defined here once, for the workflow's attempts and this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_failover.resilience.config import EndpointConfig, PolicyConfig, RolePolicy
from agent_failover.resilience.contracts import HealthSnapshot, ReasonCode
from agent_failover.resilience.cooldown_wait import plan_waiting_out
from agent_failover.resilience.estimate import estimate_request_tokens
from agent_failover.resilience.limits import MAX_REQUEST_BYTES
from agent_failover.resilience.models import ChatRequest
from agent_failover.resilience.outcomes import CallState
from agent_failover.resilience.plan import PlannedAttempt, RequestFacts
from agent_failover.resilience.planner import FailoverPlan
from agent_failover.resilience.prompts import (
    CALLER_VARIANT,
    PromptChoice,
    StructuredPath,
    apply_prompt,
    choose_prompt,
    structured_path,
)
from agent_failover.resilience.triage import bound_request_bytes, minimal_input_tokens

__all__ = [
    "PlainFirst",
    "caches_answer",
    "output_schema_for",
    "plain_first",
    "plain_start",
    "plans_hedge",
    "prompted",
    "role_request",
    "round_facts",
]


def role_request(request: ChatRequest, role: RolePolicy) -> ChatRequest:
    """``request`` with the role's default system prompt and output schema where the
    caller gave none (a caller's own system prompt is kept on every route)."""
    if request.system is None and role.system_prompt:
        request = request.model_copy(update={"system": role.system_prompt})
    if role.output_schema is not None and request.json_schema is None:
        request = request.model_copy(update={"json_schema": role.output_schema})
    return request


def round_facts(
    state: CallState,
    request: ChatRequest,
    *,
    input_tokens: int,
    floor: int,
    ticket: float,
    elapsed_ms: float,
) -> RequestFacts:
    """What the planner is told of a round: the request's size and the call's state."""
    return RequestFacts(
        input_tokens=input_tokens,
        max_output_tokens=request.max_tokens,
        elapsed_ms=elapsed_ms,
        exclude_routes=list(state.excluded),
        min_context_window=state.min_context_window,
        cooldowns=dict(state.cooldowns),
        min_input_tokens=floor,
        trial_ticket=ticket,
    )


def prompted(
    request: ChatRequest, role: RolePolicy, endpoint: EndpointConfig, own_system: bool
) -> tuple[ChatRequest, PromptChoice | None, StructuredPath | None]:
    """``request`` as ``endpoint`` gets it: the role's prompt variant for it (None: the
    caller's own system prompt is kept) and its structured-output path."""
    choice = None if own_system else choose_prompt(role, endpoint)
    path = structured_path(endpoint, request.json_schema)
    return apply_prompt(request, choice, path), choice, path


def output_schema_for(
    role: RolePolicy, path: StructuredPath | None, request_schema: dict[str, Any] | None
) -> dict[str, Any] | None:
    """What an answer is validated against: the role's schema or, when the schema only
    went into the prompt, the caller's."""
    if path is StructuredPath.PROMPT:
        return role.output_schema or request_schema
    return role.output_schema


def caches_answer(role: RolePolicy, tier: int, reasons: list[ReasonCode]) -> bool:
    """Whether an answer of ``tier`` is a full one worth caching: tiers 0 and 1 answer
    with full capability unless the context was cut or summarized."""
    return (
        role.roster.cache.enabled
        and tier <= 1
        and ReasonCode.CONTEXT_TRUNCATED not in reasons
        and ReasonCode.CONTEXT_SUMMARIZED not in reasons
    )


def plans_hedge(role: RolePolicy) -> bool:
    """Whether ``role``'s plans can hedge (the planner's own condition, with more than one
    route): its first attempt is then the workflow's to run, never the activity's."""
    return role.stateless and role.hedging.enabled and role.hedging.max_hedges > 0


@dataclass(frozen=True)
class PlainFirst:
    """A plain first attempt and the request it sends, as the workflow would build them."""

    attempt: PlannedAttempt
    request: ChatRequest
    variant: str
    path: StructuredPath | None
    output_schema: dict[str, Any] | None
    cache: bool


def plain_start(p: FailoverPlan, role: RolePolicy) -> PlannedAttempt | None:
    """The plan's first attempt when it is plain (see the module doc), else None."""
    if not p.attempts:
        return None
    first = p.attempts[0]
    hedge = len(p.attempts) > 1 and p.attempts[1].hedge and role.hedging.max_hedges > 0
    if first.wait_ms > 0 or first.floor or first.needs_triage or hedge:
        return None
    return first


def plain_first(
    role: RolePolicy,
    policy: PolicyConfig,
    snapshot: HealthSnapshot,
    request: ChatRequest,
    *,
    ticket: float,
    now: float,
) -> PlainFirst | None:
    """The call's first attempt if it is plain, planned as the workflow plans a call's
    first round at ``now`` (its start) with the trial ticket it drew; None otherwise."""
    own_system = request.system is not None
    request = role_request(request, role)
    bounded = bound_request_bytes(request, MAX_REQUEST_BYTES)
    if not bounded.fits or bounded.truncated:
        return None  # the workflow fails the call, or records the cut: not plain
    facts = round_facts(
        CallState(),
        request,
        input_tokens=estimate_request_tokens(request),
        floor=minimal_input_tokens(request),
        ticket=ticket,
        elapsed_ms=0.0,
    )
    first = plain_start(plan_waiting_out(role, policy, snapshot, facts, now), role)
    if first is None:
        return None
    sent, choice, path = prompted(request, role, policy.endpoints[first.route], own_system)
    return PlainFirst(
        attempt=first,
        request=sent,
        variant=CALLER_VARIANT if choice is None else choice.variant,
        path=path,
        output_schema=output_schema_for(role, path, request.json_schema),
        cache=caches_answer(role, first.tier, []),
    )
