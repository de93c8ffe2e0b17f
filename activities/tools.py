"""Side-effecting tools as activities: one attempt each, keyed, errors classified once.

``ToolActivities`` posts ``{tools_base_url}/{tool}`` with the arguments as JSON and the
``Idempotency-Key`` header, so Temporal may retry an attempt whose answer was lost
without applying the effect twice. Retries have one owner (Temporal): the client makes
exactly one attempt, and each failure becomes one ``ApplicationError``::

    ApplicationError(type=...)
    ├── tool_server_error   5xx                          retryable
    ├── tool_timeout        no answer within timeout_s   retryable
    ├── tool_connect_error  refused / reset              retryable
    ├── tool_rate_limited   429 (Retry-After → next_retry_delay)  retryable
    ├── tool_rejected       other 4xx                    non-retryable
    └── tool_bad_reply      2xx that is not a JSON object non-retryable

``compensate`` is the same call for an undo, kept as its own activity so the Temporal UI
shows which calls were compensations. For an undo, 404 means "nothing to undo" (the
effect was never applied, e.g. an effect that *maybe* applied and did not): it succeeds
with ``result["nothing_applied"] = True`` instead of failing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_failover.activities.models import ToolCallInput, ToolCallResult, ToolFailure

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
DEFAULT_SIM_URL = "http://127.0.0.1:8400"

TOOL_SERVER_ERROR = "tool_server_error"
TOOL_TIMEOUT = "tool_timeout"
TOOL_CONNECT_ERROR = "tool_connect_error"
TOOL_RATE_LIMITED = "tool_rate_limited"
TOOL_REJECTED = "tool_rejected"
TOOL_BAD_REPLY = "tool_bad_reply"
#: Result field of a compensation that found nothing to undo (its tool answered 404).
NOTHING_APPLIED = "nothing_applied"
#: Error types a workflow must not retry: the request itself is wrong.
NON_RETRYABLE_TOOL_ERRORS = (TOOL_REJECTED, TOOL_BAD_REPLY)


def tools_base_url(env: Mapping[str, str] | None = None) -> str:
    """``FAILOVER_TOOLS_URL``, else ``${SIM_URL}/_tools`` (the simulator's tool server)."""
    env = os.environ if env is None else env
    explicit = env.get("FAILOVER_TOOLS_URL")
    if explicit:
        return explicit.rstrip("/")
    return f"{(env.get('SIM_URL') or DEFAULT_SIM_URL).rstrip('/')}/_tools"


class ToolActivities:
    """Tool calls through the worker's HTTP client against one tool server."""

    def __init__(self, http: httpx.AsyncClient, tools_base_url: str) -> None:
        self._http = http
        self._base = tools_base_url.rstrip("/")

    @activity.defn(name="run_tool")
    async def run_tool(self, inp: ToolCallInput) -> ToolCallResult:
        """Apply one side effect (idempotent by key); one attempt, classified failure."""
        return await self._call(inp)

    @activity.defn(name="compensate")
    async def compensate(self, inp: ToolCallInput) -> ToolCallResult:
        """Undo one side effect with its compensation tool (idempotent by key; 404 = nothing)."""
        return await self._call(inp, not_found_ok=True)

    def all(self) -> list[Callable[..., Any]]:
        """Every activity of this class, for worker registration."""
        return [self.run_tool, self.compensate]

    async def _call(self, inp: ToolCallInput, not_found_ok: bool = False) -> ToolCallResult:
        started = time.monotonic()
        try:
            resp = await self._http.post(
                f"{self._base}/{inp.tool}",
                json=inp.args,
                headers={IDEMPOTENCY_HEADER: inp.idempotency_key},
                timeout=httpx.Timeout(inp.timeout_s),
            )
        except httpx.TimeoutException as exc:
            raise _error(inp, TOOL_TIMEOUT, f"no answer within {inp.timeout_s}s") from exc
        except httpx.TransportError as exc:
            raise _error(inp, TOOL_CONNECT_ERROR, f"{type(exc).__name__}: {exc}") from exc
        latency_ms = (time.monotonic() - started) * 1000
        if resp.status_code == 404 and not_found_ok:
            return _nothing_applied(inp, resp, latency_ms)
        if resp.status_code >= 400:
            raise _status_error(inp, resp)
        try:
            body = resp.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise _error(inp, TOOL_BAD_REPLY, "reply is not a JSON object", resp.status_code)
        return ToolCallResult(
            tool=inp.tool,
            idempotency_key=inp.idempotency_key,
            status=resp.status_code,
            result=body,
            replayed=resp.headers.get(REPLAYED_HEADER, "").lower() == "true",
            latency_ms=latency_ms,
        )


def _nothing_applied(inp: ToolCallInput, resp: httpx.Response, latency_ms: float) -> ToolCallResult:
    """A compensation's 404: nothing to undo, which is what the compensation wanted."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    result = body if isinstance(body, dict) else {"error": resp.text[:300]}
    return ToolCallResult(
        tool=inp.tool,
        idempotency_key=inp.idempotency_key,
        status=resp.status_code,
        result={**result, NOTHING_APPLIED: True},
        latency_ms=latency_ms,
    )


def _status_error(inp: ToolCallInput, resp: httpx.Response) -> ApplicationError:
    status = resp.status_code
    text = resp.text[:300]
    if status >= 500:
        return _error(inp, TOOL_SERVER_ERROR, f"HTTP {status}: {text}", status)
    if status == 429:
        return _error(
            inp, TOOL_RATE_LIMITED, f"HTTP 429: {text}", status, _retry_after(resp.headers)
        )
    return _error(inp, TOOL_REJECTED, f"HTTP {status}: {text}", status)


def _retry_after(headers: httpx.Headers) -> float | None:
    try:
        value = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _error(
    inp: ToolCallInput,
    error_class: str,
    message: str,
    status: int | None = None,
    retry_after_s: float | None = None,
) -> ApplicationError:
    failure = ToolFailure(
        tool=inp.tool,
        idempotency_key=inp.idempotency_key,
        error_class=error_class,
        message=message,
        status=status,
    )
    return ApplicationError(
        f"tool {inp.tool} failed: {message}",
        failure.model_dump(mode="json"),
        type=error_class,
        non_retryable=error_class in NON_RETRYABLE_TOOL_ERRORS,
        next_retry_delay=timedelta(seconds=retry_after_s) if retry_after_s else None,
    )
