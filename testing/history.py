"""The activity list of a workflow run as the Temporal UI shows it: type, summary, outcome.

``await activity_rows(handle)`` reads the run's history (``fetch_history``) and returns one
row per activity and local activity, in schedule order: its type, the summary the
workflow gave it (a ``first_call`` that ran its call's first attempt: ``ROLE → ROUTE (tier
N)``, as ``call_model``'s), and how it ended (``completed``, or the failure's type, e.g.
``overloaded``); ``format_rows(rows)`` prints them as a table. Examples and tests use it to
show that every failover attempt is its own activity; ``context_reads(history)`` lists the
roles whose role context the run read (a test of context reuse counts them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.client import WorkflowHandle
from temporalio.converter import DataConverter

#: Marker name the SDK gives a local activity's result in history.
LOCAL_ACTIVITY_MARKER = "core_local_activity"


@dataclass(frozen=True)
class ActivityRow:
    """One activity (or local activity) of a run."""

    event_id: int
    kind: str  # "activity" or "local activity"
    activity_type: str
    summary: str
    outcome: str  # "completed", "scheduled" (not finished), "cancelled" or the failure type
    attempt: int | None = None


def _text(payload: Payload) -> str:
    value = DataConverter.default.payload_converter.from_payload(payload)
    return value if isinstance(value, str) else json.dumps(value)


def _summary(event: HistoryEvent) -> str:
    if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
        return _text(event.user_metadata.summary)
    return ""


def _failure_type(failure: object) -> str:
    info = getattr(failure, "application_failure_info", None)
    return getattr(info, "type", "") or "failed"


def _local_activity(event: HistoryEvent) -> ActivityRow | None:
    attrs = event.marker_recorded_event_attributes
    if attrs.marker_name != LOCAL_ACTIVITY_MARKER or "data" not in attrs.details:
        return None
    data = json.loads(attrs.details["data"].payloads[0].data)
    failed = attrs.HasField("failure")
    return ActivityRow(
        event_id=event.event_id,
        kind="local activity",
        activity_type=str(data.get("activity_type", "?")),
        summary=_summary(event),
        outcome=_failure_type(attrs.failure) if failed else "completed",
        attempt=data.get("attempt"),
    )


async def activity_rows(handle: WorkflowHandle) -> list[ActivityRow]:
    """Every activity and local activity of the run behind ``handle``, in schedule order."""
    history = await handle.fetch_history()
    rows: dict[int, ActivityRow] = {}
    attempts: dict[int, int] = {}
    for event in history.events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            rows[event.event_id] = ActivityRow(
                event.event_id, "activity", attrs.activity_type.name, _summary(event), "scheduled"
            )
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = event.activity_task_started_event_attributes
            attempts[attrs.scheduled_event_id] = attrs.attempt
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            row = _local_activity(event)
            if row is not None:
                rows[event.event_id] = row
        else:
            _finish(event, rows, attempts)
    return list(rows.values())


def _finish(event: HistoryEvent, rows: dict[int, ActivityRow], attempts: dict[int, int]) -> None:
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        attrs: object = event.activity_task_completed_event_attributes
        outcome = "completed"
    elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        attrs = event.activity_task_failed_event_attributes
        outcome = _failure_type(event.activity_task_failed_event_attributes.failure)
    elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        attrs, outcome = event.activity_task_timed_out_event_attributes, "timeout"
    elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
        attrs, outcome = event.activity_task_canceled_event_attributes, "cancelled"
    else:
        return
    sched = int(getattr(attrs, "scheduled_event_id"))  # noqa: B009 - every kind above has it
    row = rows.get(sched)
    if row is not None:
        summary = row.summary
        if row.activity_type == "first_call":
            summary = _first_attempt_summary(row.summary, attrs)
        rows[sched] = ActivityRow(
            row.event_id, row.kind, row.activity_type, summary, outcome, attempts.get(sched)
        )


def _first_attempt_summary(summary: str, attrs: object) -> str:
    """A ``first_call`` row's summary once it ended: ``ROLE → ROUTE (tier N)`` when it ran
    the call's first attempt (its result, or its failure's second detail, names the route;
    the summary given at schedule could not), else as given (it returned the context only)."""
    result = getattr(attrs, "result", None)
    failure = getattr(attrs, "failure", None)
    payloads = list(result.payloads) if result is not None else []
    if failure is not None:
        payloads = list(failure.application_failure_info.details.payloads)[1:2]
    ran = json.loads(payloads[0].data) if payloads else {}
    if not isinstance(ran, dict) or not ran.get("route"):
        return summary
    role = summary.split(" → ", 1)[0]
    return f"{role} → {ran['route']} (tier {ran.get('tier', 0)})"


def format_rows(rows: list[ActivityRow]) -> str:
    """The rows as a plain-text table (event id, kind, type, summary, outcome, attempt)."""
    header = ("event", "kind", "activity type", "summary", "outcome", "attempt")
    cells = [
        (str(r.event_id), r.kind, r.activity_type, r.summary, r.outcome, str(r.attempt or ""))
        for r in rows
    ]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *cells]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def context_reads(history: History) -> list[str]:
    """The role of every role-context read of a run, in order: each ``role_context`` local
    activity (runs recorded before the first attempt read it) and each ``first_call``
    activity (the call's first attempt, which reads the context in new runs)."""
    roles: list[str] = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == "first_call":
                roles.append(str(json.loads(attrs.input.payloads[0].data)["role"]))
        elif event.HasField("marker_recorded_event_attributes"):
            marker = event.marker_recorded_event_attributes
            row = _local_activity(event)
            if (
                row is not None
                and row.activity_type == "role_context"
                and "result" in marker.details
            ):
                result = json.loads(marker.details["result"].payloads[0].data)
                role = result.get("role")
                roles.append(str(role.get("name") if isinstance(role, dict) else role))
    return roles
