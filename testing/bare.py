"""A bare one-activity workflow: the yardstick agent-failover's overhead is measured against.

``BareCallWorkflow`` runs a single activity (by name, ``bare_llm_call`` by default) with a
start-to-close timeout and no other command, the way a PydanticAI or OpenAI-Agents user
on Temporal runs one model call. :class:`BareActivities` is that activity over plain
``httpx``: one Anthropic Messages request, the reply's text back. Benchmarks
(``bench/overhead.py``) and comparisons register their own activity under another name
(e.g. a LiteLLM call) and pass it in :class:`BareCallInput`.

Two switches add, one at a time, what a resilient call does that this floor does not
(``bench/floor_parts.py`` measures each): ``context_bytes`` runs one local activity first
whose result is that many bytes of JSON (the role context's shape: a read recorded in
history before the call), and ``stream`` reads the reply as Anthropic's server-sent
events instead of one JSON body.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field, model_serializer
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    # Only the activity uses httpx; the sandbox must not re-import it per workflow run.
    import httpx

#: The Anthropic API version header value the simulator and the real API accept.
ANTHROPIC_VERSION = "2023-06-01"


class BareCallInput(BaseModel):
    """One model call: where to send it and what to ask."""

    base_url: str
    model: str
    prompt: str
    #: The system prompt, when the comparison sends one (the overhead bench sends the
    #: failover role's, so both arms send the same request).
    system: str | None = None
    max_tokens: int = Field(default=64, ge=1)
    activity: str = "bare_llm_call"
    timeout_s: float = Field(default=30.0, gt=0)
    #: Run the ``bare_context`` local activity first, its result this many bytes of JSON.
    context_bytes: int | None = Field(default=None, ge=8)
    #: Stream the reply (server-sent events) instead of reading one JSON body.
    stream: bool = False

    @model_serializer(mode="wrap")
    def _without_switches_off(self, handler: Any) -> Any:
        """Leave the two switches out when off: the floor's input (and history) stays the
        size it was before they existed, so ratios to it compare like with like."""
        out = handler(self)
        if isinstance(out, dict):
            if out.get("context_bytes") is None:
                out.pop("context_bytes", None)
            if out.get("stream") is False:
                out.pop("stream", None)
        return out


def _body(inp: BareCallInput) -> dict[str, object]:
    body: dict[str, object] = {
        "model": inp.model,
        "max_tokens": inp.max_tokens,
        "messages": [{"role": "user", "content": inp.prompt}],
    }
    if inp.system is not None:
        body["system"] = inp.system
    return body


_HEADERS = {"anthropic-version": ANTHROPIC_VERSION, "x-api-key": "bench"}


async def post_messages(http: httpx.AsyncClient, inp: BareCallInput) -> str:
    """POST one non-streaming Messages request and return the reply's text."""
    resp = await http.post(
        f"{inp.base_url}/v1/messages", headers=_HEADERS, json=_body(inp), timeout=inp.timeout_s
    )
    resp.raise_for_status()
    return "".join(b.get("text", "") for b in resp.json().get("content", []))


async def stream_messages(http: httpx.AsyncClient, inp: BareCallInput) -> str:
    """POST one streaming Messages request and return the text of its ``text_delta`` events,
    as a user's activity would read it (``aiter_lines``, no budgets, no partial answer).

    Anthropic's stream: https://docs.anthropic.com/en/api/messages-streaming (events
    ``content_block_delta`` carry ``delta.type == "text_delta"`` and ``delta.text``).
    """
    body = {**_body(inp), "stream": True}
    parts: list[str] = []
    url = f"{inp.base_url}/v1/messages"
    async with http.stream("POST", url, headers=_HEADERS, json=body, timeout=inp.timeout_s) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            delta = event.get("delta") if event.get("type") == "content_block_delta" else None
            if delta and delta.get("type") == "text_delta":
                parts.append(delta.get("text", ""))
    return "".join(parts)


class BareActivities:
    """The bare activity over one shared ``httpx.AsyncClient``."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    @activity.defn(name="bare_llm_call")
    async def call(self, inp: BareCallInput) -> str:
        """One model call, nothing else: no health, no cache, no failover."""
        if inp.stream:
            return await stream_messages(self._http, inp)
        return await post_messages(self._http, inp)

    @activity.defn(name="bare_context")
    async def context(self, size: int) -> dict[str, str]:
        """A local activity's result of ``size`` bytes of JSON (``{"c": "xx…"}``)."""
        return {"c": "x" * max(size - 8, 0)}


@workflow.defn(name="BareCallWorkflow")
class BareCallWorkflow:
    """Run ``inp.activity`` once and return its text."""

    @workflow.run
    async def run(self, inp: BareCallInput) -> str:
        if inp.context_bytes is not None:
            ctx = await workflow.execute_local_activity(
                "bare_context",
                inp.context_bytes,
                result_type=dict,
                start_to_close_timeout=timedelta(seconds=10),
            )
            if len(ctx.get("c", "")) + 8 < inp.context_bytes:
                raise ApplicationError("the context came back short", non_retryable=True)
        return await workflow.execute_activity(
            inp.activity,
            inp,
            result_type=str,
            start_to_close_timeout=timedelta(seconds=inp.timeout_s),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
