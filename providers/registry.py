"""The single entry point for one model call: dispatch on the endpoint's wire and cloud.

``complete`` makes exactly one attempt, always: there is no loop here or below it.
Whether to try again, on this route or another, is decided by the caller from the
typed error's :class:`~resilience.errors.Decision`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import httpx

from agent_failover.providers import anthropic, azure, bedrock, gemini, openai, vertex
from agent_failover.providers.base import ProgressCallback
from agent_failover.providers.client import Budgets
from agent_failover.resilience.endpoint import Cloud, EndpointConfig, ProviderKind
from agent_failover.resilience.models import ChatReply, ChatRequest

Adapter = Callable[..., Awaitable[ChatReply]]

#: The vendors' own APIs (and compatible servers), by wire format.
ADAPTERS: dict[ProviderKind, Adapter] = {
    ProviderKind.ANTHROPIC: anthropic.complete,
    ProviderKind.OPENAI: openai.complete,
    ProviderKind.GEMINI: gemini.complete,
    ProviderKind.BEDROCK: bedrock.complete,
}
#: Cloud-hosted routes, whose URL and auth the cloud decides.
CLOUD_ADAPTERS: dict[Cloud, Adapter] = {
    Cloud.AZURE: azure.complete,
    Cloud.AWS: bedrock.complete,
    Cloud.GCP: vertex.complete,
}


def adapter_for(endpoint: EndpointConfig) -> Adapter:
    """The adapter that speaks ``endpoint``'s wire on its cloud."""
    if endpoint.cloud is not None:
        return CLOUD_ADAPTERS[endpoint.cloud]
    return ADAPTERS[endpoint.provider]


async def complete(
    client: httpx.AsyncClient,
    endpoint: EndpointConfig,
    request: ChatRequest,
    budgets: Budgets,
    *,
    on_progress: ProgressCallback | None = None,
    now: Callable[[], float] = time.time,
) -> ChatReply:
    """One attempt at ``request`` on ``endpoint``: a ChatReply or one typed ProviderError.

    Streams when the request asks for it and the endpoint supports it. ``on_progress``
    (sync or async) receives ``(text_so_far, estimated_tokens)`` as tokens arrive, for
    heartbeats. ``now`` (epoch seconds) interprets date-valued Retry-After headers and
    decides when a cached cloud token is due for refresh. Raises only
    :class:`~resilience.errors.ProviderError` subclasses (and cancellation).
    """
    adapter = adapter_for(endpoint)
    return await adapter(client, endpoint, request, budgets, on_progress=on_progress, now=now)
