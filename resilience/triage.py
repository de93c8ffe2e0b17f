"""Context triage: cut a request down to a token budget by dropping what matters least.

When the planner sends a request to a route whose window is too small for it (a tier-2
fallback, or after a context-length failure), the request is cut in this order until
it fits:

1. drop ``background`` messages, oldest first;
2. drop ``supporting`` messages, oldest first;
3. drop what is left of the history from the middle outwards, so the opening (usually
   the task statement) and the most recent turns survive longest.

Never cut: the system prompt, ``pinned`` messages (checkpoints: the task statement, key
decisions), the latest user message and the latest tool results (with the assistant turn
that requested them). An assistant turn with tool calls and the tool results answering it
are dropped together, as one unit, because every provider rejects a tool result whose
call is missing (and vice versa). If the protected parts alone do not fit, the result
says ``fits=False`` and the caller moves on.

Dropping can leave two turns of the same role adjacent; the adapters merge consecutive
same-role turns when a wire format requires alternation.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from agent_failover.resilience.contracts import ReasonCode
from agent_failover.resilience.models import ChatRequest, Message, Priority
from agent_failover.resilience.tokens import Estimator, estimate_tokens

_RANK = {Priority.BACKGROUND: 0, Priority.SUPPORTING: 1, Priority.CRITICAL: 2}
PREVIEW_CHARS = 60


class DroppedMessage(BaseModel):
    """One message triage removed, with enough to explain the cut without the full text."""

    index: int = Field(description="position in the original request's messages")
    role: str
    priority: Priority
    tokens: int = Field(description="estimated tokens the unit it belonged to freed")
    stage: str = Field(description="'background', 'supporting' or 'middle'")
    preview: str


class TriageResult(BaseModel):
    """The request after triage and what was cut from it."""

    request: ChatRequest
    dropped: list[DroppedMessage] = Field(default_factory=list)
    truncated: bool = False
    reason_codes: list[ReasonCode] = Field(default_factory=list)
    input_tokens_before: int
    input_tokens_after: int
    fits: bool


@dataclass(frozen=True)
class _Unit:
    """Messages that are kept or dropped together (a tool call with its results)."""

    indices: tuple[int, ...]
    rank: int
    protected: bool


def _units(messages: list[Message]) -> list[_Unit]:
    groups: list[list[int]] = []
    for i, m in enumerate(messages):
        prev = messages[groups[-1][-1]] if groups else None
        # Tool results belong with the assistant turn that asked for them.
        joins_previous = (
            m.role == "tool"
            and prev is not None
            and (prev.role == "tool" or (prev.role == "assistant" and bool(prev.tool_calls)))
        )
        if joins_previous:
            groups[-1].append(i)
        else:
            groups.append([i])
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    last_tool = max((i for i, m in enumerate(messages) if m.role == "tool"), default=None)
    units = []
    for g in groups:
        protected = (last_user in g) or (last_tool in g) or any(messages[i].pinned for i in g)
        rank = max(_RANK[messages[i].priority] for i in g)
        units.append(_Unit(tuple(g), rank, protected))
    if not any(u.protected for u in units):
        # No user turn and no tool result: keep the latest turn so the request stays valid.
        last = units[-1]
        units[-1] = _Unit(last.indices, last.rank, True)
    return units


def _bare(messages: list[Message]) -> ChatRequest:
    return ChatRequest(messages=messages, stream=False)


def _marginal_cost(unit: _Unit, messages: list[Message], estimator: Estimator) -> int:
    """Tokens a unit adds to a request, exact for additive estimators.

    est(unit) - 2 est([empty]) + est([empty, empty]) cancels both the per-request and
    one per-message overhead, leaving the unit's own share.
    """
    empty = Message(role="user", content="")
    own = estimator(_bare([messages[i] for i in unit.indices]))
    one = estimator(_bare([empty]))
    two = estimator(_bare([empty, empty]))
    return max(own - 2 * one + two, 0)


def _drop_order(units: list[_Unit]) -> list[tuple[_Unit, str]]:
    """Droppable units in the order they go: background, supporting, then middle-out."""
    droppable = [u for u in units if not u.protected]
    order = [(u, "background") for u in droppable if u.rank == 0]
    order += [(u, "supporting") for u in droppable if u.rank == 1]
    rest = [u for u in droppable if u.rank == 2]
    center = (len(rest) - 1) / 2
    # Ties (two units equally near the middle) go to the older one first: recent turns
    # are more likely to matter to the next answer.
    middle_out = sorted(enumerate(rest), key=lambda p: (abs(p[0] - center), p[0]))
    order += [(u, "middle") for _, u in middle_out]
    return order


def _rebuild(request: ChatRequest, dropped: set[int]) -> ChatRequest:
    kept = [m for i, m in enumerate(request.messages) if i not in dropped]
    return request.model_copy(update={"messages": kept})


def minimal_request(request: ChatRequest) -> ChatRequest:
    """The request with everything triage may drop removed (the floor triage can reach)."""
    units = _units(request.messages)
    dropped = {i for u in units if not u.protected for i in u.indices}
    return _rebuild(request, dropped)


def minimal_input_tokens(request: ChatRequest, estimator: Estimator = estimate_tokens) -> int:
    """Estimated tokens of :func:`minimal_request`: what :class:`RequestFacts` calls the floor."""
    return estimator(minimal_request(request))


def triage(
    request: ChatRequest, max_input_tokens: int, estimator: Estimator = estimate_tokens
) -> TriageResult:
    """Cut ``request`` until its estimated input fits ``max_input_tokens`` (see module doc)."""
    before = estimator(request)
    if before <= max_input_tokens:
        return TriageResult(
            request=request, input_tokens_before=before, input_tokens_after=before, fits=True
        )
    messages = request.messages
    units = _units(messages)
    order = _drop_order(units)
    costs = {u.indices: _marginal_cost(u, messages, estimator) for u, _ in order}
    dropped_units, result, after = _drop_until_fits(
        request, order, costs, before - max_input_tokens, max_input_tokens, estimator
    )
    dropped = _dropped_messages(messages, dropped_units, costs)
    cut = bool(dropped)
    return TriageResult(
        request=result,
        dropped=dropped,
        truncated=cut,
        reason_codes=[ReasonCode.CONTEXT_TRUNCATED] if cut else [],
        input_tokens_before=before,
        input_tokens_after=after,
        fits=after <= max_input_tokens,
    )


def _drop_until_fits(
    request: ChatRequest,
    order: list[tuple[_Unit, str]],
    costs: dict[tuple[int, ...], int],
    need: int,
    max_input_tokens: int,
    estimator: Estimator,
) -> tuple[list[tuple[_Unit, str]], ChatRequest, int]:
    """Drop units in ``order`` until ``need`` tokens are freed and the request fits: the
    units dropped, the request left and its estimate."""
    # Plan with per-unit costs (one estimate per unit, not per step), then verify with
    # the real estimator and keep dropping if a non-additive estimator disagrees.
    dropped_units: list[tuple[_Unit, str]] = []
    freed = 0
    pos = 0
    while pos < len(order) and freed < need:
        dropped_units.append(order[pos])
        freed += costs[order[pos][0].indices]
        pos += 1
    dropped_idx = {i for u, _ in dropped_units for i in u.indices}
    result = _rebuild(request, dropped_idx)
    after = estimator(result)
    while after > max_input_tokens and pos < len(order):
        dropped_units.append(order[pos])
        dropped_idx.update(order[pos][0].indices)
        pos += 1
        result = _rebuild(request, dropped_idx)
        after = estimator(result)
    return dropped_units, result, after


def _dropped_messages(
    messages: list[Message],
    dropped_units: list[tuple[_Unit, str]],
    costs: dict[tuple[int, ...], int],
) -> list[DroppedMessage]:
    """One record per dropped message, in the original order."""
    dropped = [
        DroppedMessage(
            index=i,
            role=messages[i].role,
            priority=messages[i].priority,
            tokens=costs[u.indices],
            stage=stage,
            preview=messages[i].content[:PREVIEW_CHARS],
        )
        for u, stage in dropped_units
        for i in u.indices
    ]
    dropped.sort(key=lambda d: d.index)
    return dropped


def request_bytes(request: ChatRequest) -> int:
    """Bytes of ``request`` as it travels in a ``call_model`` input (its JSON form)."""
    return len(request.model_dump_json().encode("utf-8"))


def bound_request_bytes(request: ChatRequest, max_bytes: int) -> TriageResult:
    """Triage ``request`` (same order as :func:`triage`) until its JSON fits ``max_bytes``.

    Requests assembled from earlier answers (a critic or synthesis over every section)
    grow with those answers; bounding them before they are scheduled keeps the activity
    input under Temporal's payload limit. ``input_tokens_*`` hold bytes here.
    """
    return triage(request, max_bytes, estimator=request_bytes)
