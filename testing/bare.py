"""A bare one-activity workflow: the yardstick agent-failover's overhead is measured against.

``BareCallWorkflow`` runs a single activity (by name, ``bare_llm_call`` by default) with a
start-to-close timeout and no other command, the way a PydanticAI or OpenAI-Agents user
on Temporal runs one model call. :class:`BareActivities` is that activity over plain
``httpx``: one Anthropic Messages request, the reply's text back. Benchmarks
(``bench/overhead.py``) and comparisons register their own activity under another name
(e.g. a LiteLLM call) and pass it in :class:`BareCallInput`.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

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


async def post_messages(http: httpx.AsyncClient, inp: BareCallInput) -> str:
    """POST one non-streaming Messages request and return the reply's text."""
    body: dict[str, object] = {
        "model": inp.model,
        "max_tokens": inp.max_tokens,
        "messages": [{"role": "user", "content": inp.prompt}],
    }
    if inp.system is not None:
        body["system"] = inp.system
    resp = await http.post(
        f"{inp.base_url}/v1/messages",
        headers={"anthropic-version": ANTHROPIC_VERSION, "x-api-key": "bench"},
        json=body,
        timeout=inp.timeout_s,
    )
    resp.raise_for_status()
    return "".join(b.get("text", "") for b in resp.json().get("content", []))


class BareActivities:
    """The bare activity over one shared ``httpx.AsyncClient``."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    @activity.defn(name="bare_llm_call")
    async def call(self, inp: BareCallInput) -> str:
        """One model call, nothing else: no health, no cache, no failover."""
        return await post_messages(self._http, inp)


@workflow.defn(name="BareCallWorkflow")
class BareCallWorkflow:
    """Run ``inp.activity`` once and return its text."""

    @workflow.run
    async def run(self, inp: BareCallInput) -> str:
        return await workflow.execute_activity(
            inp.activity,
            inp,
            result_type=str,
            start_to_close_timeout=timedelta(seconds=inp.timeout_s),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
