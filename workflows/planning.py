"""What a resilient call settles before its first attempt, and what its first plan skipped.

The role context (policy and route health, one local activity) with the call's options
applied, the request with the role's prompt and schema bounded to one activity input, the
decision rules the planner runs under, and the health-driven skips of the first plan put
in the call's attempts and telemetry.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from agent_failover.activities.failures import POLICY_ERROR
    from agent_failover.activities.models import RoleContext, RoleContextInput
    from agent_failover.activities.role_context import RoleContextActivities
    from agent_failover.resilience.config import PolicyConfig, PolicyError, RolePolicy
    from agent_failover.resilience.contracts import AttemptRecord, ReasonCode
    from agent_failover.resilience.cooldown_wait import plan_waiting_out
    from agent_failover.resilience.errors import CLASSIFICATION, ErrorClass
    from agent_failover.resilience.first_attempt import role_request
    from agent_failover.resilience.limits import MAX_REQUEST_BYTES
    from agent_failover.resilience.models import ChatRequest
    from agent_failover.resilience.options import apply_call_options, override_routes
    from agent_failover.resilience.plan import RequestFacts
    from agent_failover.resilience.planner import FailoverPlan, SkipReason
    from agent_failover.resilience.triage import bound_request_bytes, minimal_input_tokens
    from agent_failover.workflows import context_reuse, observe
    from agent_failover.workflows.call import Call
    from agent_failover.workflows.first_call import FirstRound, first_call, planned_in_activity
    from agent_failover.workflows.patches import (
        INVALID_REQUEST_PER_WIRE,
        LIVE_TIER_FLOOR,
        WAIT_OUT_SHARED_COOLDOWN,
    )

ROLE_CONTEXT_TIMEOUT = timedelta(seconds=10)
#: Retries of a local activity (role context, pipeline roles): a transient error is
#: retried for about half a minute, a recurring one then ends the call with its message
#: (the default policy would retry it, and hold the workflow task, forever).
LOCAL_ACTIVITY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=6,
)
#: Error type of a request too big to schedule even after triage.
REQUEST_TOO_LARGE = "request_too_large"


async def load_context(call: Call, started: datetime) -> tuple[RoleContext, FirstRound | None]:
    """The role's policy and route health, with the call's options applied (also kept as
    ``call.ctx``): the context a call of the same role took less than its reuse age ago in
    this run (:mod:`.context_reuse`), else the one the first attempt's activity read (with
    that attempt's outcome when it ran it: :mod:`.first_call`), else one local activity's."""
    routes = override_routes(call.options)
    key = context_reuse.key_for(call.role_name, routes)
    ctx = context_reuse.reusable(key, call.options)
    first = None
    if ctx is None:
        # A role known to hedge runs its first attempt in the workflow: no first_call.
        if not context_reuse.hedging_known(key) and planned_in_activity(call):
            first = await first_call(call, started, routes)
        if first is None:
            ctx = await _read_context(call, started, routes)
        else:
            ctx = first.ctx.as_read(workflow.info().task_queue, started.timestamp())
        context_reuse.keep(key, ctx, started.timestamp())
        # Only a context read for this call brings its first attempt a lease (a reused
        # one's went with the call that read it: that attempt takes its own), and only
        # when no attempt carried it already.
        call.first_lease = ctx.lease if first is None or not first.ran else None
    try:
        role = apply_call_options(ctx.role, ctx.policy, call.options)
    except PolicyError as exc:
        raise ApplicationError(str(exc), type=POLICY_ERROR, non_retryable=True) from exc
    call.ctx = ctx = ctx.model_copy(update={"role": role})
    return ctx, first


async def _read_context(call: Call, started: datetime, routes: list[str] | None) -> RoleContext:
    """The ``role_context`` local activity's context, on the workflow's queue, its snapshot
    dated (before the call's options)."""
    ctx: RoleContext = await workflow.execute_local_activity_method(
        RoleContextActivities.role_context,
        RoleContextInput(
            role=call.role_name,
            now=started.timestamp(),
            routes=routes,
            workflow_queue=workflow.info().task_queue,
            # The first attempt's in-flight lease, taken in the snapshot's round trip. No
            # patch: what follows reads the context's recorded lease (none in a context
            # recorded before, whose first attempt then takes its own, as it did).
            lease=True,
        ),
        start_to_close_timeout=ROLE_CONTEXT_TIMEOUT,
        # Bounded: an error that keeps recurring ends the call with its reason
        # instead of retrying the local activity (and the workflow task) forever.
        retry_policy=LOCAL_ACTIVITY_RETRY,
        # No summary: each payload costs the worker several entries into the sandbox, and
        # the attempts' summaries (ROLE → ROUTE (tier N)) show what was substituted.
        # `failover report` finds the call's start by the marker's activity type.
    )
    return ctx.as_read(workflow.info().task_queue, started.timestamp())


def prepare_request(call: Call, role: RolePolicy) -> ChatRequest:
    """The request with the role's default prompt and schema, bounded for history."""
    # A caller's own system prompt is kept on every route (call.own_system); otherwise
    # each attempt gets the role's variant for its route (attempts.prepare), the default here.
    call.request = request = _bounded(call, role_request(call.request, role))
    return request


def _bounded(call: Call, request: ChatRequest) -> ChatRequest:
    """The request triaged to fit one activity input (:data:`MAX_REQUEST_BYTES`).

    A request built from earlier answers can outgrow Temporal's payload limit; one
    that cannot be cut down (its protected turns alone are too big) fails the call.
    """
    bounded = bound_request_bytes(request, MAX_REQUEST_BYTES)
    if not bounded.fits:
        raise ApplicationError(
            f"role {call.role_name!r}: request of {bounded.input_tokens_before} bytes "
            f"cannot be cut below {MAX_REQUEST_BYTES} bytes (the system prompt, latest "
            f"user turn, tool results and pinned messages alone are "
            f"{bounded.input_tokens_after} bytes)",
            type=REQUEST_TOO_LARGE,
            non_retryable=True,
        )
    if bounded.truncated:
        call.state.add_reason(ReasonCode.CONTEXT_TRUNCATED)
    return bounded.request


def decision_rules(call: Call, request: ChatRequest) -> tuple[int, float]:
    """(triage floor, trial ticket): what the planner needs of the request beyond its
    size, fixed once per call."""
    # What triage could at best shrink the request to: a route whose window cannot
    # hold even that is skipped (CONTEXT_TOO_SMALL), not sent a request it rejects.
    floor = minimal_input_tokens(request)
    # One draw per call decides whether it may be a half-open route's real-call
    # trial (breaker.half_open_call_fraction); workflow.random() replays exactly. A call
    # whose first attempt was planned in its activity drew it before scheduling that.
    if call.ticket is None:
        call.ticket = workflow.random().random()
    return floor, call.ticket


def routes_by_family(policy: PolicyConfig) -> dict[str, list[str]]:
    """Route names grouped by model family: Claude on Bedrock or Vertex is the model the
    Anthropic API serves, under another id, and refuses the same content."""
    routes: dict[str, list[str]] = {}
    for name, ep in policy.endpoints.items():
        routes.setdefault(ep.family, []).append(name)
    return routes


def routes_by_wire(policy: PolicyConfig) -> dict[str, list[str]]:
    """Route names grouped by wire (``EndpointConfig.wire``): the API that validates a
    request, which refuses the same parameters in every region."""
    routes: dict[str, list[str]] = {}
    for name, ep in policy.endpoints.items():
        routes.setdefault(ep.wire, []).append(name)
    return routes


def wire_rule(call: Call, route: str, error_type: str) -> dict[str, Any]:
    """``apply_failure``'s wire arguments for a failure whose class stops the call only
    once several wires rejected the request (a 400): the failed route's wire and every
    route by wire. Empty for any other failure, and for runs recorded before the rule
    (patch ``INVALID_REQUEST_PER_WIRE``), where a 400 stopped the live tiers at once."""
    try:
        ec = ErrorClass(error_type)
    except ValueError:
        return {}
    if CLASSIFICATION[ec].stop_after_wires <= 1 or not workflow.patched(INVALID_REQUEST_PER_WIRE):
        return {}
    policy = call.ctx.policy
    return {"wire": policy.endpoints[route].wire, "routes_by_wire": routes_by_wire(policy)}


def tiers_tried(call: Call) -> list[int]:
    """Live tiers this call has made an attempt on (skip records and the cache aside)."""
    return sorted({a.tier for a in call.attempts if a.outcome != "skipped" and a.tier <= 2})


def plan_round(
    call: Call, role: RolePolicy, facts: RequestFacts, at: float | None = None
) -> FailoverPlan:
    """The plan for the next round, with the live-tier floor (each untried tier keeps one
    attempt past the budget) unless the run was recorded before it (patch
    ``LIVE_TIER_FLOOR``, asked only when the attempt about to run is a floor one), and a
    short shared cool-down of its first route waited out (patch
    ``WAIT_OUT_SHARED_COOLDOWN``, asked only when the plan waits: resilience.cooldown_wait).
    ``at``: plan at that time instead of now (the round its first attempt's activity
    planned at the call's start)."""
    ctx, now = call.ctx, workflow.now().timestamp() if at is None else at
    facts = facts.model_copy(update={"tiers_tried": tiers_tried(call)})
    p = plan_waiting_out(role, ctx.policy, ctx.snapshot, facts, now)
    if p.attempts and p.attempts[0].wait_ms and not workflow.patched(WAIT_OUT_SHARED_COOLDOWN):
        # Recorded before: a cooling route was skipped, never waited for.
        facts = facts.model_copy(update={"wait_out_cooldowns": False})
        p = plan_waiting_out(role, ctx.policy, ctx.snapshot, facts, now)
    running = p.attempts[:1] + [a for a in p.attempts[1:2] if a.hedge]
    if any(a.floor for a in running) and not workflow.patched(LIVE_TIER_FLOOR):
        p = plan_waiting_out(
            role, ctx.policy, ctx.snapshot, facts.model_copy(update={"live_tier_floor": False}), now
        )
    return p


def record_skipped(call: Call, p: FailoverPlan) -> None:
    """Put health-driven skips in the history; budget skips only clutter it."""
    now = workflow.now().timestamp()
    for s in p.skipped:
        if s.code in (
            SkipReason.BREAKER_OPEN,
            SkipReason.FORCED_OPEN,
            SkipReason.COOLING_DOWN,
            SkipReason.HALF_OPEN,
        ):
            observe.skipped(call, s.route, s.tier, s.code.value)
            call.state.add_reason(ReasonCode.BREAKER_OPEN)
            call.state.add_reason(ReasonCode.MODEL_UNAVAILABLE)
        elif s.code is SkipReason.RATE_BUDGET:
            # Out of shared budget: planned like a cool-down, reported as such.
            observe.skipped(call, s.route, s.tier, s.code.value)
            call.state.add_reason(ReasonCode.RATE_BUDGET)
        elif s.code is SkipReason.SLA_DEMOTED:
            # Demoted routes stay in the plan, moved last: a reason, not a skip.
            call.state.add_reason(ReasonCode.SLA_DEMOTED)
            observe.sla_demoted(call, s.route, s.reason)
            continue
        elif s.code is SkipReason.QUALITY_REGRESSION:
            call.state.add_reason(ReasonCode.QUALITY_REGRESSION)
            observe.quality_demoted(call, s.route, s.reason)
            continue
        elif s.code is SkipReason.UNQUALIFIED and s.tier > 0:
            # Below the role's min_quality in the qualification lock. Only a skipped
            # primary is recorded on every call (it is why a standby answers); a
            # fallback's skip is in the plan's explanation, not each call's history.
            continue
        elif s.code not in (SkipReason.CONTEXT_TOO_SMALL, SkipReason.UNQUALIFIED):
            continue
        call.attempts.append(
            AttemptRecord(
                route=s.route,
                tier=s.tier,
                started_at=now,
                finished_at=now,
                outcome="skipped",
                note=s.reason,
            )
        )
