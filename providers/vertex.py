"""Google Vertex AI adapter: Gemini and Anthropic models on regional endpoints.

``POST {base}/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/``
``{model}:{method}`` with ``base`` = ``https://{region}-aiplatform.googleapis.com``
(``aiplatform.googleapis.com`` for the ``global`` location) unless the endpoint names
another (a private endpoint, a gateway, the simulator). The provider decides the
publisher and the body:

* ``provider: gemini`` → publisher ``google``, ``generateContent`` /
  ``streamGenerateContent?alt=sse`` with the Gemini body, stream and reply
  (:mod:`providers.gemini`);
* ``provider: anthropic`` → publisher ``anthropic``, ``rawPredict`` /
  ``streamRawPredict`` with the Anthropic Messages body minus ``model`` plus
  ``anthropic_version: vertex-2023-10-16`` (:mod:`providers.anthropic`).

Auth is an OAuth access token from ``google-auth`` (application default credentials:
a service-account file, workload identity or the metadata server), refreshed before it
expires by the credential store and sent as ``Authorization: Bearer``. Errors are
Google's (``RESOURCE_EXHAUSTED`` 429 with ``RetryInfo``, per-day ``QuotaFailure`` as an
exhausted quota, 503 ``UNAVAILABLE``) or, for Claude, Anthropic's (529 overloaded).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from agent_failover.providers import anthropic, gemini
from agent_failover.providers.base import Call, ProgressCallback, ReplyParts, run_json, run_stream
from agent_failover.providers.client import Budgets
from agent_failover.resilience.endpoint import EndpointConfig, ProviderKind
from agent_failover.resilience.models import ChatReply, ChatRequest

#: ``anthropic_version`` Vertex expects in the body of a Claude request.
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
PUBLISHERS = {ProviderKind.GEMINI: "google", ProviderKind.ANTHROPIC: "anthropic"}


def url(endpoint: EndpointConfig, *, stream: bool) -> str:
    """The model's regional ``:method`` URL for its publisher."""
    publisher = PUBLISHERS[endpoint.provider]
    path = (
        f"/v1/projects/{quote(endpoint.project or '', safe='')}/locations/{endpoint.region}"
        f"/publishers/{publisher}/models/{quote(endpoint.model, safe='@')}"
    )
    if endpoint.provider is ProviderKind.ANTHROPIC:
        method = "streamRawPredict" if stream else "rawPredict"
        return f"{endpoint.base()}{path}:{method}"
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{endpoint.base()}{path}:{method}"


def anthropic_body(endpoint: EndpointConfig, request: ChatRequest, *, stream: bool) -> dict:
    """The Messages body as Vertex's rawPredict takes it: no ``model``, a vertex version."""
    body = anthropic.build_body(endpoint, request, stream=stream)
    body.pop("model", None)
    body["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
    return body


async def complete(
    client: httpx.AsyncClient,
    endpoint: EndpointConfig,
    request: ChatRequest,
    budgets: Budgets,
    *,
    on_progress: ProgressCallback | None = None,
    now: Callable[[], float] = time.time,
) -> ChatReply:
    """One call to a Vertex AI model (streaming when both sides allow it)."""
    claude = endpoint.provider is ProviderKind.ANTHROPIC
    prefix = anthropic.prefill_text(request) if claude else (request.prefill or "")
    call = Call.start(
        client, endpoint, request, budgets, on_progress=on_progress, now=now, prefix=prefix
    )
    headers = {"content-type": "application/json"}
    target = url(endpoint, stream=call.streaming)
    if claude:
        body = anthropic_body(endpoint, request, stream=call.streaming)
        state: Any = anthropic.AnthropicStream(call)
        read = anthropic.parse_reply
    else:
        body = gemini.build_body(endpoint, request)
        state = gemini.GeminiStream(call)
        read = gemini.parse_reply

    def parse(payload: Any) -> ReplyParts:
        return read(call, payload)

    if not call.streaming:
        return await run_json(call, target, headers, body, parse)
    return await run_stream(call, target, headers, body, state, parse)
