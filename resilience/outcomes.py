"""How a failed attempt changes the rest of a call: pure bookkeeping for the workflow.

The workflow feeds each attempt's classified failure to :func:`apply_failure`, which
updates the :class:`CallState` (routes to exclude, cool-downs, minimum context window,
reason codes, whether live tiers must stop) — so the decision logic is testable with no
Temporal at all, and replay sees only values.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent_failover.resilience.contracts import ReasonCode
from agent_failover.resilience.degrade import reason_codes_for
from agent_failover.resilience.errors import CLASSIFICATION, Decision, ErrorClass

#: Cool-down when a COOLDOWN-class error carried no Retry-After.
DEFAULT_COOLDOWN_S = 30.0
#: Error type a breaker rejection carries (not a provider error: the call never left).
BREAKER_REJECTED = "breaker_rejected"
#: Error type for an activity that Temporal timed out (the route exceeded its budget).
ATTEMPT_TIMEOUT = "attempt_timeout"
#: Error type when the route's shared rate budget refused the call (it never left).
RATE_BUDGET = "rate_budget"


class CallState(BaseModel):
    """What the failover loop has learned so far in one resilient call."""

    excluded: list[str] = Field(default_factory=list)
    cooldowns: dict[str, float] = Field(default_factory=dict)
    min_context_window: int = 0
    reasons: list[ReasonCode] = Field(default_factory=list)
    stop_live: bool = False
    #: Wires (``EndpointConfig.wire``) that rejected this request with a STOP-class error.
    rejected_wires: list[str] = Field(default_factory=list)
    prefill_text: str = ""
    prefill_blocked: bool = False

    def add_reason(self, code: ReasonCode) -> None:
        if code not in self.reasons:
            self.reasons.append(code)


def apply_failure(
    state: CallState,
    *,
    route: str,
    model: str,
    context_window: int | None,
    error_type: str,
    retry_after_s: float | None,
    partial_text: str,
    used_prefill: bool,
    now: float,
    routes_by_model: dict[str, list[str]],
    stated_context_window: int | None = None,
    partial_truncated: bool = False,
    decision: str | None = None,
    wire: str | None = None,
    routes_by_wire: dict[str, list[str]] | None = None,
) -> CallState:
    """Fold one failed attempt into the call state and return the new state.

    ``context_window`` is what the plan believed of the route (learned or configured,
    None if unknown); ``stated_context_window`` what its rejection said, which wins.
    ``partial_truncated`` says the failure carried only the tail of what was streamed
    (failure details are bounded): a tail cannot be continued, so it is never a prefill.
    ``decision`` is the one the provider boundary gave this failure: where it says another
    route can serve a request its class would stop (Gemini 3's missing thought signature),
    the call fails over instead of stopping its live tiers. ``wire`` is the failed route's
    wire and ``routes_by_wire`` every route by wire: a STOP-class error whose class asks for
    several wires (``stop_after_wires``: a 400) then leaves the routes of that wire and
    stops the live tiers only once that many wires rejected the request. Without ``wire``
    (runs recorded before this rule) the first rejection stops them.
    """
    s = state.model_copy(deep=True)
    if route not in s.excluded:
        s.excluded.append(route)
    for code in reason_codes_for(error_type):
        s.add_reason(code)
    ec = _provider_error(error_type)
    if ec is None:
        return s
    if ec is ErrorClass.INVALID_REQUEST and used_prefill:
        # The route rejected our prefill continuation, not the request: keep going
        # without prefill rather than let this mask the original stream failure.
        s.prefill_blocked = True
        s.prefill_text = ""
        s.reasons.remove(ReasonCode.INVALID_REQUEST)
        return s
    by_class = CLASSIFICATION[ec].decision
    failover_instead = by_class is Decision.STOP and decision == Decision.FAILOVER.value
    if by_class is Decision.STOP and not failover_instead and wire is not None:
        failover_instead = _other_wires_left(s, ec, wire, routes_by_wire or {})
    _learn(
        s,
        ec,
        Decision.FAILOVER if failover_instead else by_class,
        model=model,
        known_window=stated_context_window or context_window,
        routes_by_model=routes_by_model,
    )
    if by_class is Decision.COOLDOWN:
        s.cooldowns[route] = now + (retry_after_s if retry_after_s else DEFAULT_COOLDOWN_S)
    if partial_text and not partial_truncated:
        _keep_partial(s, ec, partial_text)
    return s


def _other_wires_left(
    s: CallState, ec: ErrorClass, wire: str, routes_by_wire: dict[str, list[str]]
) -> bool:
    """Record ``wire``'s rejection (in place); True while fewer wires than the class asks
    for have rejected the request: the call leaves that wire's routes and goes on."""
    if wire not in s.rejected_wires:
        s.rejected_wires.append(wire)
    if len(s.rejected_wires) >= CLASSIFICATION[ec].stop_after_wires:
        return False
    for r in routes_by_wire.get(wire, []):
        if r not in s.excluded:
            s.excluded.append(r)
    return True


def _provider_error(error_type: str) -> ErrorClass | None:
    """The provider error class of a failure, or None for one that never reached a
    provider (breaker, timeout, rate budget) or is not a known class."""
    if error_type in (BREAKER_REJECTED, ATTEMPT_TIMEOUT, RATE_BUDGET):
        return None
    try:
        return ErrorClass(error_type)
    except ValueError:
        return None


def _learn(
    s: CallState,
    ec: ErrorClass,
    decision: Decision,
    *,
    model: str,
    known_window: int | None,
    routes_by_model: dict[str, list[str]],
) -> None:
    """What the error class teaches the rest of the call (in place)."""
    if ec is ErrorClass.CONTEXT_LENGTH:
        # Only a larger window can help; smaller ones would fail the same way. With no
        # known window the route is just excluded: other unknown windows are still tried.
        if known_window is not None:
            s.min_context_window = max(s.min_context_window, known_window + 1)
    elif ec is ErrorClass.CONTENT_FILTER:
        # The same model behind another region would refuse the same content.
        for r in routes_by_model.get(model, []):
            if r not in s.excluded:
                s.excluded.append(r)
    elif decision is Decision.STOP:
        s.stop_live = True


def _keep_partial(s: CallState, ec: ErrorClass, partial_text: str) -> None:
    """Keep the longest cut stream's text so the next attempt can continue it (prefill)."""
    if ec in (ErrorClass.STREAM_CUT, ErrorClass.STREAM_STALLED):
        if not s.prefill_blocked and len(partial_text) > len(s.prefill_text):
            s.prefill_text = partial_text
