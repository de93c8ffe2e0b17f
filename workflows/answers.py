"""The answer of a resilient call whose live tiers answered, or refused.

:func:`success` turns the winning attempt into an :class:`AgentOutput` carrying its
degradation contract (capability, tier, reason codes, confidence, every attempt) and
samples the call for shadow evaluation. :func:`refusal` returns a
content-filter refusal as such, for roles that do not fail over on it.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.config import ContentFilterMode, RolePolicy
    from agent_failover.resilience.contracts import AgentOutput, Capability, ReasonCode
    from agent_failover.resilience.degrade import confidence_for
    from agent_failover.resilience.models import FinishReason
    from agent_failover.workflows.call import AttemptResult, Call
    from agent_failover.workflows.shadow import maybe_shadow


def success(call: Call, winner: AttemptResult, role: RolePolicy) -> AgentOutput:
    """The winning attempt's answer with its degradation contract (a full answer was
    cached by its own ``call_model`` activity, see ``attempts``)."""
    assert winner.result is not None
    reply = winner.result.reply
    tier = winner.attempt.tier
    reasons = _reasons(call, winner)
    # Tier 0/1 serve the role's intended model class; tier 2 is a smaller model.
    capability = Capability.FULL if tier <= 1 else Capability.DEGRADED
    if ReasonCode.CONTEXT_TRUNCATED in reasons or ReasonCode.CONTEXT_SUMMARIZED in reasons:
        capability = Capability.DEGRADED
    output = AgentOutput(
        role=call.role_name,
        # With a prefill the adapter already returns prefill + continuation.
        content=reply.text,
        data=winner.result.data,
        capability=capability,
        tier=tier,
        route=winner.attempt.route,
        model=reply.model,
        reason_codes=reasons,
        confidence=confidence_for(capability, tier, reasons),
        attempts=call.attempts,
        usage=reply.usage,
        cost_usd=reply.cost_usd + call.summary_cost,
        latency_ms=sum(a.latency_ms or 0.0 for a in call.attempts),
        tool_calls=list(reply.tool_calls),
        finish_reason=reply.finish_reason,
        reasoning=reply.reasoning,
    )
    # Sampled calls are re-run on the reference route by a child nobody waits for.
    maybe_shadow(role, call.request, winner.attempt.route, reply.text, call.ctx.snapshot)
    return output


def _reasons(call: Call, winner: AttemptResult) -> list[ReasonCode]:
    """The call's reason codes with those of the tier and way the winner answered."""
    tier = winner.attempt.tier
    reasons = list(call.state.reasons)
    if tier == 1:
        reasons.append(ReasonCode.STANDBY_ROUTE)
    if tier >= 2:
        reasons.append(ReasonCode.SMALLER_MODEL)
    if winner.used_prefill:
        reasons.append(ReasonCode.PREFILL_CONTINUATION)
    if call.upstream:
        reasons.append(ReasonCode.UPSTREAM_DEGRADED)
    return list(dict.fromkeys(reasons))


def refusal(
    call: Call, results: list[AttemptResult], role: RolePolicy, started: Any
) -> AgentOutput | None:
    """A content refusal returned as such, unless the role opted in to failing over.

    Shopping a refused prompt around until some model answers it defeats the filter's
    purpose and turns a policy decision into a lottery; the caller gets the refusal.
    """
    if role.content_filter is not ContentFilterMode.REFUSE:
        return None
    hit = next((r for r in results if r.error_type == "content_filter"), None)
    if hit is None:
        return None
    message = str(hit.details.get("message") or "refused by the provider's content filter")
    reasons = list(dict.fromkeys([*call.state.reasons, ReasonCode.CONTENT_FILTERED]))
    tier = hit.attempt.tier
    capability = Capability.FULL if tier <= 1 else Capability.DEGRADED
    return AgentOutput(
        role=call.role_name,
        content="",
        capability=capability,
        tier=tier,
        route=hit.attempt.route,
        model=call.ctx.policy.endpoints[hit.attempt.route].model,
        reason_codes=reasons,
        confidence=confidence_for(capability, tier, reasons),
        attempts=call.attempts,
        latency_ms=(workflow.now() - started).total_seconds() * 1000,
        finish_reason=FinishReason.CONTENT_FILTER,
        refusal=message[:4000],
    )
