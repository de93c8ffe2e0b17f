"""Summarization before truncation: the pure half (what to summarize, where, and how to
fold the summary back in).

When a role opts in (``summarize.enabled``) and triage would drop context that is not
mere background, the workflow first asks the cheapest healthy route for a summary of
exactly what triage would drop (pinned checkpoints excluded: they are never dropped),
then replaces those messages with one summary turn and triages the result. These
functions decide; :mod:`workflows.summarize` runs the activity.
"""

from __future__ import annotations

from pydantic import BaseModel

from agent_failover.resilience.config import PolicyConfig, RolePolicy
from agent_failover.resilience.contracts import BreakerState, HealthSnapshot
from agent_failover.resilience.models import ChatRequest, Message, Priority
from agent_failover.resilience.tokens import estimate_tokens
from agent_failover.resilience.triage import triage

SUMMARY_SYSTEM = (
    "You condense conversation history for another assistant. Summarize the transcript "
    "below: keep facts, figures, names, decisions and open questions; drop pleasantries. "
    "Answer with the summary only."
)
#: How the summary turn introduces itself to the model that reads it.
SUMMARY_HEADER = "[Summary of {n} earlier messages, condensed to fit this model's context]"
#: Characters of one message that go into the summarization transcript.
MAX_MESSAGE_CHARS = 8_000
_HEALTHY = (BreakerState.CLOSED, BreakerState.FORCED_CLOSED)


class SummaryPlan(BaseModel):
    """What to summarize: indices of the messages triage would drop, and the request."""

    indices: list[int]
    request: ChatRequest


def plan_summary(request: ChatRequest, target_tokens: int, max_tokens: int) -> SummaryPlan | None:
    """The summarization of what triage to ``target_tokens`` would drop, or None when it
    would drop nothing but background (or nothing at all)."""
    tri = triage(request, target_tokens)
    if not tri.dropped or all(d.priority is Priority.BACKGROUND for d in tri.dropped):
        return None
    indices = [d.index for d in tri.dropped]
    lines = []
    for i in indices:
        m = request.messages[i]
        who = m.tool_name or m.role
        lines.append(f"[{who}] {m.content[:MAX_MESSAGE_CHARS]}")
    ask = ChatRequest(
        system=SUMMARY_SYSTEM,
        messages=[Message(role="user", content="\n\n".join(lines))],
        max_tokens=max_tokens,
        temperature=0.0,
    )
    return SummaryPlan(indices=indices, request=ask)


def with_summary(request: ChatRequest, indices: list[int], summary: str) -> ChatRequest:
    """``request`` with the messages at ``indices`` replaced by one summary turn, placed
    where the first of them was (pinned messages are never among them)."""
    drop = set(indices)
    turn = Message(
        role="user",
        content=f"{SUMMARY_HEADER.format(n=len(drop))}\n{summary.strip()}",
        priority=Priority.CRITICAL,
    )
    first = min(drop)
    kept: list[Message] = []
    for i, m in enumerate(request.messages):
        if i == first:
            kept.append(turn)
        if i not in drop:
            kept.append(m)
    return request.model_copy(update={"messages": kept})


def summary_route(
    role: RolePolicy,
    policy: PolicyConfig,
    snapshot: HealthSnapshot,
    summary: ChatRequest,
    now: float,
    exclude: list[str] | None = None,
) -> str | None:
    """The cheapest healthy route of the role's roster whose window holds ``summary``.

    Healthy: breaker closed (or forced closed), not cooling down after a 429, not
    latency-demoted, not excluded for this call. Cost is the route's price for the
    summary's input plus its full output; ties keep roster order.
    """
    need = estimate_tokens(summary) + summary.max_tokens
    best: tuple[float, int, str] | None = None
    for pos, route in enumerate(role.roster.routes()):
        ep = policy.endpoints.get(route)
        health = snapshot.get(route)
        if ep is None or route in (exclude or []):
            continue
        if health.breaker not in _HEALTHY or health.sla_demoted:
            continue
        if health.cooldown_until is not None and health.cooldown_until > now:
            continue
        window = health.context_window or ep.context_window
        if window is not None and window < need:
            continue
        cost = ep.prices.cost(need - summary.max_tokens, summary.max_tokens)
        if best is None or (cost, pos) < best[:2]:
            best = (cost, pos, route)
    return best[2] if best else None
