"""What ``failover report`` reads of a run that is not a completed pipeline: its history.

Every ``resilient_complete`` call leaves the same records in its workflow's history,
whatever the workflow: a ``first_call`` activity when the call starts (its input names the
role; it completes with the role context and, when it ran the call's first attempt, that
attempt's route, tier and reply, or fails typed by that attempt's error class with the
route and tier in its details), or, in runs recorded before it or calls that reuse a
context, a ``role_context`` local activity (no summary; ``ROLE: route health`` in older
runs) or nothing; then one ``call_model`` activity per further attempt (its input names
the role and the route, its summary ``ROLE → ROUTE (tier N)``; it completes with the
reply, latency and time to first token included, or fails typed by its error class, e.g.
``overloaded``) and, once the live tiers are exhausted, a ``cache_lookup`` activity. From
those, :func:`calls_from_history` rebuilds each call: its role, its attempts, and what
answered — a live route (tier 0-2), the cache, or, when neither did in a closed run, the
static fallback. Capability follows the degradation contract (tiers 0-1 full, tier 2 and the
cache degraded, static); a full answer degraded only by a truncated context is counted full
here (the pipeline's own results, read elsewhere, carry it exactly).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from agent_failover.resilience.contracts import Capability

#: The marker the SDK records a local activity's completion with.
LOCAL_ACTIVITY_MARKER = "core_local_activity"
#: The summary a call's ``role_context`` had in runs recorded before it was left out.
ROUTE_HEALTH = ": route health"
_TIER = re.compile(r"\(tier (\d+)\)")
_E = EventType


@dataclass
class AttemptFacts:
    """One attempt of a call as history shows it (the fields the report reads)."""

    route: str
    tier: int
    outcome: str = "pending"
    latency_ms: float | None = None
    ttft_ms: float | None = None


@dataclass
class CallFacts:
    """One ``resilient_complete`` call: its role, attempts and what answered (None: nothing
    yet; the report leaves such calls of running workflows out)."""

    role: str
    attempts: list[AttemptFacts] = field(default_factory=list)
    tier: int | None = None
    capability: Capability | None = None

    def answer(self, tier: int, capability: Capability) -> None:
        self.tier, self.capability = tier, capability


def _capability(tier: int) -> Capability:
    return Capability.FULL if tier <= 1 else Capability.DEGRADED


async def _values(client: Client, payloads: Any) -> list[Any]:
    """The payloads as plain values (the client's codec applied: encrypted history too)."""
    items = list(payloads.payloads) if payloads is not None else []
    if not items:
        return []
    return await client.data_converter.decode(items, [dict] * len(items))


async def _summary(client: Client, event: HistoryEvent) -> str:
    if not (event.HasField("user_metadata") and event.user_metadata.HasField("summary")):
        return ""
    payload: Payload = event.user_metadata.summary
    value = client.data_converter.payload_converter.from_payload(payload)
    return value if isinstance(value, str) else ""


async def _call_start(client: Client, event: HistoryEvent) -> str | None:
    """The role of the call a local activity's marker starts, or None if it starts none.

    A call's ``role_context`` has no summary (older runs had ``ROLE: route health``);
    another use of it (a re-run asking whether the primary is
    back) has its own summary and starts no call.
    """
    summary = await _summary(client, event)
    if summary.endswith(ROUTE_HEALTH):
        return summary.removesuffix(ROUTE_HEALTH)
    if summary:
        return None
    details = event.marker_recorded_event_attributes.details
    data = await _values(client, details["data"]) if "data" in details else []
    if not data or not isinstance(data[0], dict) or data[0].get("activity_type") != "role_context":
        return None
    result = await _values(client, details["result"]) if "result" in details else []
    role = result[0].get("role") if result and isinstance(result[0], dict) else None
    if isinstance(role, dict):  # a role the call's options changed travels whole
        role = role.get("name")
    return str(role) if role else "?"


class _Calls:
    """The calls of one run, built event by event."""

    def __init__(self) -> None:
        self.calls: list[CallFacts] = []
        self.open: dict[str, list[CallFacts]] = defaultdict(list)
        self.attempts: dict[int, tuple[CallFacts, AttemptFacts]] = {}
        self.lookups: dict[int, CallFacts] = {}
        #: ``first_call`` activities by scheduled event id: the call each starts.
        self.firsts: dict[int, CallFacts] = {}

    def start(self, role: str) -> CallFacts:
        call = CallFacts(role)
        self.calls.append(call)
        self.open[role].append(call)
        return call

    def current(self, role: str) -> CallFacts:
        return self.open[role][-1] if self.open[role] else self.start(role)

    def answered(self, call: CallFacts, tier: int, capability: Capability) -> None:
        if call.tier is None:
            call.answer(tier, capability)
            if call in self.open[call.role]:
                self.open[call.role].remove(call)


async def calls_from_history(
    client: Client, handle: WorkflowHandle, closed: bool
) -> list[CallFacts]:
    """The ``resilient_complete`` calls of the run behind ``handle`` (``closed``: calls left
    without a live or cached answer got the static fallback)."""
    history = await handle.fetch_history()
    state = _Calls()
    for event in history.events:
        await _fold(client, event, state)
    for call in state.calls:
        if call.tier is None and closed:
            call.attempts.append(AttemptFacts("static", 3, "ok"))
            call.answer(3, Capability.STATIC)
    return [c for c in state.calls if c.tier is not None]


async def _fold(client: Client, event: HistoryEvent, state: _Calls) -> None:
    kind = event.event_type
    if kind == _E.EVENT_TYPE_MARKER_RECORDED:
        attrs = event.marker_recorded_event_attributes
        if attrs.marker_name == LOCAL_ACTIVITY_MARKER:
            role = await _call_start(client, event)
            if role is not None:
                state.start(role)
    elif kind == _E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        await _scheduled(client, event, state)
    elif kind == _E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        attrs = event.activity_task_completed_event_attributes
        await _completed(client, attrs.scheduled_event_id, attrs.result, state)
    elif kind == _E.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        attrs = event.activity_task_failed_event_attributes
        info = attrs.failure.application_failure_info
        if attrs.scheduled_event_id in state.firsts:
            details = await _values(client, info.details)
            ran = details[1] if len(details) > 1 and isinstance(details[1], dict) else {}
            _first_attempt(state.firsts[attrs.scheduled_event_id], ran, info.type or "failed")
        _ended(attrs.scheduled_event_id, info.type or "failed", state)
    elif kind == _E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        _ended(event.activity_task_timed_out_event_attributes.scheduled_event_id, "timeout", state)
    elif kind == _E.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
        _ended(event.activity_task_canceled_event_attributes.scheduled_event_id, "cancelled", state)


async def _scheduled(client: Client, event: HistoryEvent, state: _Calls) -> None:
    attrs = event.activity_task_scheduled_event_attributes
    name = attrs.activity_type.name
    if name == "call_model":
        values = await _values(client, attrs.input)
        inp = values[0] if values and isinstance(values[0], dict) else {}
        tier = _TIER.search(await _summary(client, event))
        role, route = str(inp.get("role", "?")), str(inp.get("route", "?"))
        attempt = AttemptFacts(route, int(tier.group(1)) if tier else 0)
        call = state.current(role)
        call.attempts.append(attempt)
        state.attempts[event.event_id] = (call, attempt)
    elif name == "first_call":
        values = await _values(client, attrs.input)
        inp = values[0] if values and isinstance(values[0], dict) else {}
        state.firsts[event.event_id] = state.start(str(inp.get("role", "?")))
    elif name == "cache_lookup":
        summary = await _summary(client, event)
        role = summary.split(": ", 1)[0] if ": " in summary else "?"
        state.lookups[event.event_id] = state.current(role)


def _first_attempt(call: CallFacts, ran: dict[str, Any], outcome: str) -> AttemptFacts | None:
    """The attempt a ``first_call`` ran (its result or failure details name the route),
    added to its call; None when it returned the role context only."""
    if not ran.get("route"):
        return None
    attempt = AttemptFacts(str(ran["route"]), int(ran.get("tier", 0)), outcome)
    call.attempts.append(attempt)
    return attempt


async def _completed(client: Client, sched: int, result: Any, state: _Calls) -> None:
    if sched in state.firsts:
        call = state.firsts[sched]
        values = await _values(client, result)
        ran = values[0] if values and isinstance(values[0], dict) else {}
        attempt = _first_attempt(call, ran, "ok")
        if attempt is not None:
            reply = (ran.get("result") or {}).get("reply", {})
            attempt.latency_ms, attempt.ttft_ms = reply.get("latency_ms"), reply.get("ttft_ms")
            state.answered(call, attempt.tier, _capability(attempt.tier))
    elif sched in state.attempts:
        call, attempt = state.attempts[sched]
        values = await _values(client, result)
        reply = (values[0] or {}).get("reply", {}) if values and isinstance(values[0], dict) else {}
        attempt.outcome = "ok"
        attempt.latency_ms = reply.get("latency_ms")
        attempt.ttft_ms = reply.get("ttft_ms")
        state.answered(call, attempt.tier, _capability(attempt.tier))
    elif sched in state.lookups:
        call = state.lookups[sched]
        values = await _values(client, result)
        hit = bool(values and isinstance(values[0], dict) and values[0].get("hit"))
        call.attempts.append(AttemptFacts("cache", 3, "ok" if hit else "miss"))
        if hit:
            state.answered(call, 3, Capability.DEGRADED)


def _ended(sched: int, outcome: str, state: _Calls) -> None:
    if sched in state.attempts:
        state.attempts[sched][1].outcome = outcome
