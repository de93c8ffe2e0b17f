"""``failover report`` finds a call's start in history with or without the ``role_context``
local activity's summary (runs recorded before it was left out had ``ROLE: route health``),
and a ``role_context`` with another summary (a re-run's check) starts no call."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_failover.cli.report_history import LOCAL_ACTIVITY_MARKER, calls_from_history

HISTORY = Path(__file__).parents[1] / "histories" / "call_eager_dispatch.json"


def _history(summary: str | None, calls: int = 1) -> WorkflowHistory:
    """The recorded one-call run (role ``plain``), its local activity's summary replaced
    (None: left out, as a call records it now); ``calls`` > 1 puts that many role contexts
    first, as calls that ended without an attempt (every route skipped) leave them."""
    doc = json.loads(HISTORY.read_text())
    events = []
    for event in doc["events"]:
        attrs = event.get("markerRecordedEventAttributes")
        if attrs and attrs["markerName"] == LOCAL_ACTIVITY_MARKER:
            event.pop("userMetadata", None)
            if summary is not None:
                [payload] = pydantic_data_converter.payload_converter.to_payloads([summary])
                event["userMetadata"] = {"summary": json.loads(_to_json(payload))}
            events += [event] * (calls - 1)
        events.append(event)
    return WorkflowHistory.from_json("wf", {**doc, "events": events})


def _to_json(payload: Any) -> str:
    from google.protobuf.json_format import MessageToJson

    return MessageToJson(payload)


async def _calls(history: WorkflowHistory) -> list[tuple[str, list[str]]]:
    client: Any = SimpleNamespace(data_converter=pydantic_data_converter)

    async def fetch_history() -> WorkflowHistory:
        return history

    handle: Any = SimpleNamespace(fetch_history=fetch_history)
    calls = await calls_from_history(client, handle, closed=True)
    return [(c.role, [a.route for a in c.attempts]) for c in calls]


@pytest.mark.parametrize("summary", [None, "plain: route health"])
async def test_each_role_context_starts_a_call(summary: str | None) -> None:
    """Two calls: the first ended without an attempt (the static answer), the second on
    the primary; with the summary left out the marker's activity type and result tell."""
    assert await _calls(_history(summary, calls=2)) == [
        ("plain", ["static"]),
        ("plain", ["anthropic-us-east"]),
    ]


async def test_a_role_context_with_its_own_summary_starts_no_call() -> None:
    """A re-run's "is the primary back?" check is not a call."""
    history = _history("synthesis: is plain's primary back?", calls=2)
    assert await _calls(history) == [("plain", ["anthropic-us-east"])]
