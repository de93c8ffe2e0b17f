"""ToolActivities: one attempt, the key on the wire, failures classified once for Temporal."""

from __future__ import annotations

import httpx
import pytest
from temporalio.exceptions import ApplicationError

from agent_failover.activities.models import ToolCallInput
from agent_failover.activities.tools import ToolActivities, tools_base_url


def _acts(handler) -> tuple[ToolActivities, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(record))
    return ToolActivities(http, "http://tools.test/_tools/"), seen


INP = ToolCallInput(tool="create_ticket", args={"title": "x"}, idempotency_key="k-1")


async def test_success_sends_key_and_reports_replay() -> None:
    """The Idempotency-Key header goes out; Idempotent-Replayed comes back as replayed."""
    acts, seen = _acts(
        lambda r: httpx.Response(201, json={"id": "T-1"}, headers={"Idempotent-Replayed": "true"})
    )
    res = await acts.run_tool(INP)
    assert res.result == {"id": "T-1"} and res.replayed and res.status == 201
    assert seen[0].headers["Idempotency-Key"] == "k-1"
    assert str(seen[0].url) == "http://tools.test/_tools/create_ticket"


@pytest.mark.parametrize(
    ("response", "error_type", "non_retryable"),
    [
        (httpx.Response(500, text="boom"), "tool_server_error", False),
        (httpx.Response(503), "tool_server_error", False),
        (httpx.Response(429, headers={"retry-after": "2"}), "tool_rate_limited", False),
        (httpx.Response(400, text="bad"), "tool_rejected", True),
        (httpx.Response(409), "tool_rejected", True),
        (httpx.Response(200, text="not json"), "tool_bad_reply", True),
    ],
)
async def test_failures_are_classified_once(
    response: httpx.Response, error_type: str, non_retryable: bool
) -> None:
    """5xx / 429 retryable (Temporal owns the retry), 4xx and garbage are not; one request."""
    acts, seen = _acts(lambda r: response)
    with pytest.raises(ApplicationError) as info:
        await acts.compensate(INP)
    assert info.value.type == error_type and info.value.non_retryable is non_retryable
    assert info.value.details[0]["idempotency_key"] == "k-1"
    assert len(seen) == 1
    if error_type == "tool_rate_limited":
        assert info.value.next_retry_delay is not None


async def test_timeout_and_connect_errors_are_retryable() -> None:
    """No answer in time, or no connection: retryable, never a sleep."""

    def timeout(r: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=r)

    def refused(r: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=r)

    for handler, kind in ((timeout, "tool_timeout"), (refused, "tool_connect_error")):
        acts, _ = _acts(handler)
        with pytest.raises(ApplicationError) as info:
            await acts.run_tool(INP)
        assert info.value.type == kind and not info.value.non_retryable


def test_base_url_from_env() -> None:
    """FAILOVER_TOOLS_URL wins; else the simulator's /_tools; else the default sim URL."""
    assert tools_base_url({"FAILOVER_TOOLS_URL": "http://t/x/"}) == "http://t/x"
    assert tools_base_url({"SIM_URL": "http://s:1/"}) == "http://s:1/_tools"
    assert tools_base_url({}) == "http://127.0.0.1:8400/_tools"


async def test_compensate_404_is_nothing_applied_but_run_tool_404_fails() -> None:
    """For an undo, 404 means "nothing to undo" (a success); for an effect it is a rejection."""
    body = {"error": "no ticket", "nothing_applied": True}
    acts, _ = _acts(lambda r: httpx.Response(404, json=body))
    res = await acts.compensate(INP)
    assert res.status == 404 and res.result["nothing_applied"] is True
    plain, _ = _acts(lambda r: httpx.Response(404, text="gone"))
    assert (await plain.compensate(INP)).result == {"error": "gone", "nothing_applied": True}
    with pytest.raises(ApplicationError) as info:
        await acts.run_tool(INP)
    assert info.value.type == "tool_rejected"
