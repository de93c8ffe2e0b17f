"""Recording helpers for the IO side (activities, stores): metrics and span events.

One call per fact (an attempt answered, a breaker moved, a cache lookup...), so the
activities read as what they do. Events go on the current span: Temporal's
``RunActivity`` span when tracing is on (see ``FailoverPlugin``), nothing otherwise.
"""

from __future__ import annotations

from typing import Any

from agent_failover.telemetry import names
from agent_failover.telemetry.instruments import enabled, instruments, note_breaker_state
from agent_failover.telemetry.spans import event, provider_name


def genai_attributes(endpoint: Any, response_model: str | None = None) -> dict[str, Any]:
    """The GenAI metric attributes of one attempt on ``endpoint`` (plus its route)."""
    attrs = {
        names.GEN_AI_OPERATION_NAME: names.OPERATION_CHAT,
        names.GEN_AI_PROVIDER_NAME: provider_name(
            endpoint.provider.value, endpoint.cloud.value if endpoint.cloud else None
        ),
        names.GEN_AI_REQUEST_MODEL: endpoint.model,
        "route": endpoint.name,
    }
    if response_model:
        attrs[names.GEN_AI_RESPONSE_MODEL] = response_model
    return attrs


def attempt_answered(role: str, endpoint: Any, reply: Any) -> None:
    """An attempt that answered: duration, tokens, time to first chunk, cost, validation."""
    if not enabled():
        return
    inst = instruments()
    attrs = genai_attributes(endpoint, reply.model)
    inst.duration.record(reply.latency_ms / 1000, {**attrs, "role": role})
    if reply.ttft_ms is not None:
        inst.ttfc.record(reply.ttft_ms / 1000, attrs)
    if reply.usage is not None:
        inst.tokens.record(reply.usage.input_tokens, {**attrs, names.GEN_AI_TOKEN_TYPE: "input"})
        inst.tokens.record(reply.usage.output_tokens, {**attrs, names.GEN_AI_TOKEN_TYPE: "output"})
    if reply.cost_usd:
        inst.cost.add(reply.cost_usd, {"route": endpoint.name, "role": role})
    inst.attempts.add(1, {"route": endpoint.name, "role": role, "outcome": "ok"})
    inst.validations.add(1, {"route": endpoint.name, "result": "pass"})


def attempt_failed(
    role: str,
    endpoint: Any,
    error_class: str,
    elapsed_ms: float,
    *,
    semantic: bool,
    billed_usd: float = 0.0,
) -> None:
    """An attempt that failed with a classified error (``error.type`` is its class).

    ``billed_usd``: what the provider billed for a whole body we rejected; it counts in
    ``failover.cost`` (and not its tokens), so tokens per dollar falls with rejections.
    """
    if not enabled():
        return
    inst = instruments()
    attrs = {**genai_attributes(endpoint), names.ERROR_TYPE: error_class}
    inst.duration.record(elapsed_ms / 1000, {**attrs, "role": role})
    inst.attempts.add(1, {"route": endpoint.name, "role": role, "outcome": error_class})
    if billed_usd:
        inst.cost.add(billed_usd, {"route": endpoint.name, "role": role})
    if semantic:
        inst.validations.add(1, {"route": endpoint.name, "result": "fail"})


def breaker_transition(transition: Any) -> None:
    """A breaker moved: count it, note the state for the gauge, time a restoration."""
    attrs = {
        "route": transition.route,
        "from": transition.from_state.value,
        "to": transition.to_state.value,
        "reason": transition.reason.value,
    }
    inst = instruments()
    inst.transitions.add(1, attrs)
    event(names.EV_BREAKER_TRANSITION, {f"failover.breaker.{k}": v for k, v in attrs.items()})
    restored_after = note_breaker_state(
        transition.route, transition.to_state.value, at=transition.at
    )
    if restored_after is not None:
        inst.restoration.record(restored_after, {"route": transition.route})


def breaker_state(route: str, state: str) -> None:
    """A breaker state read from the store (probes, health tables): the gauge's value."""
    note_breaker_state(route, state)


def sla_changed(role: str, route: str, demoted: bool, stats: Any) -> None:
    """A route's SLA verdict flipped: demoted below its peers, or restored past hysteresis."""
    event(
        names.EV_SLA_DEMOTED if demoted else names.EV_SLA_RESTORED,
        {
            "failover.role": role,
            "failover.route": route,
            "failover.p95_ms": stats.p95_ms,
            "failover.p99_ms": stats.p99_ms,
        },
    )


def shadow_sample(role: str, route: str, score: float, agreed: bool) -> None:
    """One shadow comparison of ``route``'s answer with the reference route's."""
    inst = instruments()
    inst.shadow_samples.add(1, {"role": role, "route": route, "agreed": agreed})
    inst.shadow_agreement.record(score, {"role": role, "route": route})


def quality_changed(
    role: str, route: str, regressed: bool, reason: str, delta: float | None
) -> None:
    """A route's quality verdict flipped: ``QUALITY_REGRESSION`` found, or lifted."""
    event(
        names.EV_QUALITY_REGRESSION if regressed else names.EV_QUALITY_RESTORED,
        {
            "failover.role": role,
            "failover.route": route,
            "failover.reason": reason,
            "failover.quality.delta": delta,
        },
    )
    instruments().quality_regressions.add(
        1, {"role": role, "route": route, "event": "regressed" if regressed else "restored"}
    )


def probe(route: str, ok: bool, state: str) -> None:
    """One health probe and the breaker state it left."""
    instruments().probes.add(1, {"route": route, "ok": ok})
    note_breaker_state(route, state)


def probe_skipped(route: str, reason: str, state: str) -> None:
    """A probe round that sent nothing (recent real traffic, open, cooling down)."""
    instruments().probes_skipped.add(1, {"route": route, "reason": reason})
    note_breaker_state(route, state)


def cache_lookup(hit: bool) -> None:
    """One response-cache lookup (the age of served answers is recorded by the workflow)."""
    instruments().cache_lookups.add(1, {"hit": hit})


def store_outage(store: str) -> None:
    """A shared store lost its backend and serves from its local view."""
    instruments().store_degraded.add(1, {"store": store})


def budget_refused(role: str, route: str, bulkhead: str, scope: str) -> None:
    """A call refused by a shared rate budget (``scope``: the bucket that refused) before
    it reached the provider: the span event and the refusals counter."""
    event(
        names.EV_RATE_BUDGET_REFUSED,
        {
            "failover.role": role,
            "failover.route": route,
            "failover.bulkhead": bulkhead,
            "failover.budget_scope": scope,
        },
    )
    instruments().budget_refusals.add(
        1, {"scope": scope, "route": route, "bulkhead": bulkhead, "role": role}
    )


def local_saturation(role: str, route: str, bulkhead: str) -> None:
    """A call that found every one of this worker's connection slots for ``route`` busy
    (``bulkhead``'s): the span event and the saturation counter. Never the route's fault."""
    event(
        names.EV_LOCAL_SATURATION,
        {"failover.role": role, "failover.route": route, "failover.bulkhead": bulkhead},
    )
    instruments().local_saturations.add(1, {"route": route, "bulkhead": bulkhead, "role": role})
