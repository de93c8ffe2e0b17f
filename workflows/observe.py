"""Telemetry of one resilient call, from workflow code: spans, span events and metrics.

``resilient_complete`` calls these helpers at its decision points so its own code stays
about failover. Spans come from :func:`agent_failover.telemetry.spans.workflow_tracer`
(real only under Temporal's replay-safe provider) and metrics go through the replay-safe
meter provider, so a replayed workflow neither repeats a span nor counts twice. With
telemetry off every helper is a no-op apart from a provider lookup.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.contracts import AgentOutput, Capability
    from agent_failover.telemetry import names
    from agent_failover.telemetry.instruments import instruments
    from agent_failover.telemetry.spans import (
        NOOP_TRACER,
        end_attempt_span,
        event,
        provider_name,
        start_attempt_span,
        workflow_tracer,
    )


if TYPE_CHECKING:
    from agent_failover.activities.models import CallModelResult, RoleContext
    from agent_failover.resilience.contracts import AttemptRecord
    from agent_failover.resilience.outcomes import CallState
    from agent_failover.resilience.planner import PlannedAttempt


@dataclass
class CallTelemetry:
    """The telemetry state of one resilient call (spans open, the failure to substitute)."""

    span: trace.Span = trace.INVALID_SPAN
    spans: dict[Any, trace.Span] = field(default_factory=dict)
    pending: trace.Span = trace.INVALID_SPAN
    attempt_no: int = 0
    last_failed: tuple[str, int, str] | None = None


class ObservedCall(Protocol):
    """What these helpers read of a call (:class:`agent_failover.workflows.call.Call`)."""

    role_name: str
    ctx: RoleContext
    state: CallState
    obs: CallTelemetry


class ObservedAttempt(Protocol):
    """What these helpers read of an attempt's outcome (``call.AttemptResult``)."""

    attempt: PlannedAttempt
    record: AttemptRecord
    result: CallModelResult | None
    error_type: str | None


@contextmanager
def call_span(call: ObservedCall) -> Iterator[trace.Span]:
    """The span of one resilient call (``invoke_agent {role}``); its attempts are its
    children. It is never made the current span: a context attached across an ``await``
    would be detached in another context when an evicted workflow's coroutine is closed."""
    tracer = workflow_tracer()
    if tracer is NOOP_TRACER:
        yield trace.INVALID_SPAN
        return
    role = call.role_name
    span = tracer.start_span(
        f"{names.OPERATION_INVOKE_AGENT} {role}",
        attributes={
            names.GEN_AI_OPERATION_NAME: names.OPERATION_INVOKE_AGENT,
            names.GEN_AI_AGENT_NAME: role,
            names.ATTR_ROLE: role,
        },
    )
    call.obs.span = span
    try:
        yield span
    except GeneratorExit:
        raise  # evicted from the worker's cache: the run goes on (replayed) elsewhere
    except BaseException:
        span.end()
        raise
    span.end()


def attempt_started(call: ObservedCall, attempt: PlannedAttempt, max_tokens: int | None) -> Any:
    """Open the attempt's span and make it current (the activity becomes its child).

    Returns the context token for :func:`attempt_scheduled`. A failed attempt waiting
    for its successor becomes a substitution event here (from, to, reason, p95/p99).
    """
    ep = call.ctx.policy.endpoints[attempt.route]
    obs = call.obs
    obs.attempt_no += 1
    _substituted(call, attempt)
    span = start_attempt_span(
        role=call.role_name,
        route=attempt.route,
        model=ep.model,
        provider=provider_name(ep.provider.value, ep.cloud.value if ep.cloud else None),
        tier=attempt.tier,
        attempt=obs.attempt_no,
        hedge=attempt.hedge,
        max_tokens=max_tokens,
        parent=obs.span,
    )
    obs.pending = span
    if not span.is_recording():
        return None
    # Current only while the activity is scheduled (no await until attempt_scheduled), so
    # Temporal's interceptor makes the activity a child of the attempt.
    return otel_context.attach(trace.set_span_in_context(span))


def attempt_scheduled(call: ObservedCall, handle: Any, token: Any) -> None:
    """The activity is scheduled: remember its span by handle, restore the context."""
    if token is not None:
        otel_context.detach(token)
    if call.obs.pending.is_recording():
        call.obs.spans[handle] = call.obs.pending


def attempt_finished(call: ObservedCall, handle: Any, r: ObservedAttempt) -> None:
    """Close the attempt's span with its reply or error type; count a failure."""
    span = call.obs.spans.pop(handle, None)
    if span is None:
        return
    reply = r.result.reply if r.result is not None else None
    end_attempt_span(
        span,
        outcome=r.record.outcome,
        response_model=reply.model if reply else None,
        input_tokens=reply.usage.input_tokens if reply and reply.usage else None,
        output_tokens=reply.usage.output_tokens if reply and reply.usage else None,
        finish_reason=getattr(reply.finish_reason, "value", None) if reply else None,
        reason_codes=[c.value for c in call.state.reasons],
    )
    if r.error_type is not None:
        call.obs.last_failed = (r.attempt.route, r.attempt.tier, r.error_type)


def _substituted(call: ObservedCall, to: PlannedAttempt | None, *, to_route: str = "") -> None:
    failed = call.obs.last_failed
    if failed is None:
        return
    call.obs.last_failed = None
    route, tier, reason = failed
    stats = call.ctx.snapshot.get(route).stats
    to_name = to.route if to is not None else to_route
    to_tier = to.tier if to is not None else 3
    event(
        names.EV_SUBSTITUTION,
        {
            "failover.from": route,
            "failover.to": to_name,
            "failover.reason": reason,
            "failover.from_tier": tier,
            "failover.to_tier": to_tier,
            "failover.from.p95_ms": stats.p95_ms,
            "failover.from.p99_ms": stats.p99_ms,
        },
        span=call.obs.span,
    )
    instruments().substitutions.add(
        1,
        {"role": call.role_name, "from_tier": tier, "to_tier": to_tier, "reason": reason},
    )


def hedge(call: ObservedCall, kind: str, handle: Any, attempt: PlannedAttempt) -> None:
    """Hedge ``fired`` (on the slow primary's span), ``won`` (the call's span) or
    ``cancelled`` (the loser's span, which ends here: the loser is never collected)."""
    spans = call.obs.spans
    # The winner's span is already closed when it wins: its event goes on the call's span.
    if kind == "won":
        span: trace.Span | None = call.obs.span
    else:
        span = spans.pop(handle, None) if kind == "cancelled" else spans.get(handle)
    name = {
        "fired": names.EV_HEDGE_FIRED,
        "won": names.EV_HEDGE_WON,
        "cancelled": names.EV_HEDGE_CANCELLED,
    }[kind]
    if span is not None:
        event(name, {"failover.route": attempt.route, "failover.tier": attempt.tier}, span=span)
        if kind == "cancelled":
            end_attempt_span(span, outcome="cancelled")
    instruments().hedges.add(1, {"role": call.role_name, "event": kind})


def skipped(call: ObservedCall, route: str, tier: int, reason: str) -> None:
    """A route the plan skipped (breaker open, cooling down): the first one skipped is
    what whichever route answers substitutes for."""
    if call.obs.last_failed is None and call.obs.attempt_no == 0:
        call.obs.last_failed = (route, tier, reason)


def sla_demoted(call: ObservedCall, route: str, reason: str) -> None:
    """A route the plan moved last because its p95/p99 breach the role's SLA."""
    stats = call.ctx.snapshot.get(route).stats
    event(
        names.EV_SLA_DEMOTED,
        {
            "failover.route": route,
            "failover.reason": reason,
            "failover.p95_ms": stats.p95_ms,
            "failover.p99_ms": stats.p99_ms,
        },
        span=call.obs.span,
    )


def quality_demoted(call: ObservedCall, route: str, reason: str) -> None:
    """A route the plan moved last because shadow evaluation marked it QUALITY_REGRESSION."""
    event(
        names.EV_QUALITY_REGRESSION,
        {
            "failover.route": route,
            "failover.reason": reason,
            "failover.quality.since": call.ctx.snapshot.get(route).quality_since,
        },
        span=call.obs.span,
    )


def cache_served(call: ObservedCall, age_s: float) -> None:
    """The degraded tier answered from the response cache."""
    _substituted(call, None, to_route="cache")
    event(names.EV_CACHE_SERVED, {"failover.cache.age_s": age_s}, span=call.obs.span)
    instruments().cache_age.record(age_s, {"role": call.role_name})


def answered(call: ObservedCall, out: AgentOutput) -> None:
    """The call's answer: served tier, capability, cascade depth, reason codes."""
    if out.capability is Capability.STATIC:
        _substituted(call, None, to_route="static")
        event(names.EV_STATIC_SERVED, {"failover.reason_codes": _codes(out)}, span=call.obs.span)
    span = call.obs.span
    if span.is_recording():
        span.set_attributes(
            {
                names.ATTR_TIER: out.tier,
                names.ATTR_ROUTE: out.route or "",
                names.ATTR_CAPABILITY: out.capability.value,
                names.ATTR_REASON_CODES: _codes(out),
            }
        )
    tried = sum(1 for a in out.attempts if a.outcome not in ("skipped", "cancelled"))
    inst = instruments()
    attrs = {"role": call.role_name, "tier": out.tier, "capability": out.capability.value}
    inst.answers.add(1, attrs)
    inst.cascade_depth.record(max(tried, 1), {"role": call.role_name})


def _codes(out: AgentOutput) -> list[str]:
    return [c.value for c in out.reason_codes]


def escalation(kind: str, step: str, role: str, detail: str) -> None:
    """An escalation ``opened`` (waiting for a human) or ``resolved`` (decision or timeout)."""
    event(
        names.EV_ESCALATION_OPENED if kind == "opened" else names.EV_ESCALATION_RESOLVED,
        {"failover.step": step, "failover.role": role, "failover.detail": detail[:200]},
    )
    instruments().escalations.add(1, {"event": kind, "role": role})


def compensation(kind: str, step: str, tool: str, error: str | None = None) -> None:
    """A saga compensation that ``run`` (undone) or ``failed`` (it will escalate)."""
    event(
        names.EV_COMPENSATION_RUN if kind == "run" else names.EV_COMPENSATION_FAILED,
        {"failover.step": step, "failover.tool": tool, "failover.error": (error or "")[:200]},
    )
    instruments().compensations.add(1, {"outcome": kind, "tool": tool})
