"""Azure OpenAI adapter: Chat Completions on a regional resource's deployment.

``POST {base}/openai/deployments/{deployment}/chat/completions?api-version={api_version}``
where ``base`` is the resource (``https://my-resource-swc.openai.azure.com``), one per
region. The body, the stream and the reply are OpenAI's (:mod:`providers.openai`), with
Azure's additions read where they matter: ``prompt_filter_results`` chunks carry no
choices and are skipped, a ``content_filter`` finish reason and a 400 whose
``innererror.code`` is ``ResponsibleAIPolicyViolation`` are content filters, a 429's
``retry-after-ms`` is the cool-down. Auth is the ``api-key`` header (from
``api_key_env``) or an Entra ID bearer token from ``azure-identity``
(``auth: entra_id``, added by the credential store); ``auth: none`` is for a gateway
that authenticates for you.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from agent_failover.providers import openai
from agent_failover.providers.base import Call, ProgressCallback, ReplyParts, run_json, run_stream
from agent_failover.providers.client import Budgets
from agent_failover.resilience.endpoint import DEFAULT_AZURE_API_VERSION, EndpointConfig
from agent_failover.resilience.models import ChatReply, ChatRequest


def url(endpoint: EndpointConfig) -> str:
    """The deployment's chat completions URL with its ``api-version``."""
    deployment = quote(endpoint.deployment or endpoint.model, safe="")
    version = quote(endpoint.api_version or DEFAULT_AZURE_API_VERSION, safe="")
    return (
        f"{endpoint.base()}/openai/deployments/{deployment}/chat/completions?api-version={version}"
    )


def build_headers(key: str | None) -> dict[str, str]:
    """Headers of every call; a key goes only into ``api-key`` (a token is added by the signer)."""
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["api-key"] = key
    return headers


async def complete(
    client: httpx.AsyncClient,
    endpoint: EndpointConfig,
    request: ChatRequest,
    budgets: Budgets,
    *,
    on_progress: ProgressCallback | None = None,
    now: Callable[[], float] = time.time,
) -> ChatReply:
    """One call to an Azure OpenAI deployment (streaming when both sides allow it)."""
    call = Call.start(
        client,
        endpoint,
        request,
        budgets,
        on_progress=on_progress,
        now=now,
        prefix=request.prefill or "",
    )
    body = openai.build_body(endpoint, request, stream=call.streaming)
    headers = build_headers(call.key)

    def parse(payload: Any) -> ReplyParts:
        return openai.parse_reply(call, payload)

    if not call.streaming:
        return await run_json(call, url(endpoint), headers, body, parse)
    return await run_stream(call, url(endpoint), headers, body, openai.OpenAIStream(call), parse)
