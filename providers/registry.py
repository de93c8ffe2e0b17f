"""The single entry point for one model call: the endpoint's wire adapter, by cloud and wire.

:data:`ADAPTERS` names the :class:`~providers.wire.WireAdapter` of every (cloud, wire)
pair an endpoint can declare; :func:`complete` runs the one shared pipeline
(:func:`providers.pipeline.complete`) with it. ``complete`` makes exactly one attempt,
always: there is no loop here or below it. Whether to try again, on this route or
another, is decided by the caller from the typed error's
:class:`~resilience.errors.Decision`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from agent_failover.providers import anthropic, azure, bedrock, gemini, openai, pipeline, vertex
from agent_failover.providers.base import ProgressCallback
from agent_failover.providers.client import Budgets
from agent_failover.providers.wire import WireAdapter
from agent_failover.resilience.endpoint import Cloud, EndpointConfig, ProviderKind
from agent_failover.resilience.models import ChatReply, ChatRequest

#: ``(cloud, provider)`` -> adapter; cloud ``None`` is the vendor's own API (or a
#: compatible server), a cloud decides the URL and the auth of the wires it hosts.
ADAPTERS: dict[tuple[Cloud | None, ProviderKind], WireAdapter] = {
    (None, ProviderKind.ANTHROPIC): anthropic.WIRE,
    (None, ProviderKind.OPENAI): openai.WIRE,
    (None, ProviderKind.GEMINI): gemini.WIRE,
    (None, ProviderKind.BEDROCK): bedrock.WIRE,
    (Cloud.AZURE, ProviderKind.OPENAI): azure.WIRE,
    (Cloud.AWS, ProviderKind.BEDROCK): bedrock.WIRE,
    (Cloud.GCP, ProviderKind.GEMINI): vertex.GEMINI,
    (Cloud.GCP, ProviderKind.ANTHROPIC): vertex.CLAUDE,
}


def adapter_for(endpoint: EndpointConfig) -> WireAdapter:
    """The adapter that speaks ``endpoint``'s wire on its cloud."""
    return ADAPTERS[(endpoint.cloud, endpoint.provider)]


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
    return await pipeline.complete(
        adapter, client, endpoint, request, budgets, on_progress=on_progress, now=now
    )
