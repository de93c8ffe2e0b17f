"""Azure OpenAI adapter: Chat Completions on a regional resource's deployment.

``POST {base}/openai/deployments/{deployment}/chat/completions?api-version={api_version}``
where ``base`` is the resource (``https://my-resource-swc.openai.azure.com``), one per
region. The body, the stream and the reply are OpenAI's (:class:`~providers.openai.OpenAIWire`,
of which :class:`AzureWire` changes only the URL and the key's header), with
Azure's additions read where they matter: ``prompt_filter_results`` chunks carry no
choices and are skipped, a ``content_filter`` finish reason and a 400 whose
``innererror.code`` is ``ResponsibleAIPolicyViolation`` are content filters, a 429's
``retry-after-ms`` is the cool-down. Auth is the ``api-key`` header (from
``api_key_env``) or an Entra ID bearer token from ``azure-identity``
(``auth: entra_id``, added by the credential store); ``auth: none`` is for a gateway
that authenticates for you.
"""

from __future__ import annotations

from urllib.parse import quote

from agent_failover.providers.openai import OpenAIWire
from agent_failover.resilience.endpoint import DEFAULT_AZURE_API_VERSION, EndpointConfig


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


class AzureWire(OpenAIWire):
    """OpenAI's wire on an Azure deployment: its own URL and ``api-key`` header."""

    def headers(self, key: str | None, *, stream: bool) -> dict[str, str]:
        """:func:`build_headers`."""
        return build_headers(key)

    def url(self, endpoint: EndpointConfig, *, stream: bool) -> str:
        """:func:`url`."""
        return url(endpoint)


WIRE = AzureWire()
