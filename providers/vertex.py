"""Google Vertex AI adapter: Gemini and Anthropic models on regional endpoints.

``POST {base}/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/``
``{model}:{method}`` with ``base`` = ``https://{region}-aiplatform.googleapis.com``
(``aiplatform.googleapis.com`` for the ``global`` location) unless the endpoint names
another (a private endpoint, a gateway, the simulator). The provider decides the
publisher and the body:

* ``provider: gemini`` → publisher ``google``, ``generateContent`` /
  ``streamGenerateContent?alt=sse`` with the Gemini body, stream and reply
  (:class:`VertexGeminiWire`: :mod:`providers.gemini`'s wire with this URL);
* ``provider: anthropic`` → publisher ``anthropic``, ``rawPredict`` /
  ``streamRawPredict`` with the Anthropic Messages body minus ``model`` plus
  ``anthropic_version: vertex-2023-10-16`` (:class:`VertexClaudeWire`:
  :mod:`providers.anthropic`'s wire with this URL and body).

Auth is an OAuth access token from ``google-auth`` (application default credentials:
a service-account file, workload identity or the metadata server), refreshed before it
expires by the credential store and sent as ``Authorization: Bearer``. Errors are
Google's (``RESOURCE_EXHAUSTED`` 429 with ``RetryInfo``, per-day ``QuotaFailure`` as an
exhausted quota, 503 ``UNAVAILABLE``) or, for Claude, Anthropic's (529 overloaded).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from agent_failover.providers import anthropic
from agent_failover.providers.anthropic import AnthropicWire
from agent_failover.providers.gemini import GeminiWire
from agent_failover.resilience.endpoint import EndpointConfig, ProviderKind
from agent_failover.resilience.models import ChatRequest

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


#: Vertex authenticates with the signer's bearer token; the body alone says the rest.
_HEADERS = {"content-type": "application/json"}


class VertexGeminiWire(GeminiWire):
    """Gemini's wire on Vertex: the regional publisher URL, auth by the signer only."""

    def headers(self, key: str | None, *, stream: bool) -> dict[str, str]:
        """Only the content type: the token is added when the request is signed."""
        return dict(_HEADERS)

    def url(self, endpoint: EndpointConfig, *, stream: bool) -> str:
        """:func:`url`."""
        return url(endpoint, stream=stream)


class VertexClaudeWire(AnthropicWire):
    """Anthropic's wire on Vertex: ``rawPredict`` URLs, :func:`anthropic_body`, no key header."""

    def headers(self, key: str | None, *, stream: bool) -> dict[str, str]:
        """Only the content type (no ``anthropic-version`` header: the body carries it)."""
        return dict(_HEADERS)

    def body(self, endpoint: EndpointConfig, request: ChatRequest, *, stream: bool) -> Any:
        """:func:`anthropic_body`."""
        return anthropic_body(endpoint, request, stream=stream)

    def url(self, endpoint: EndpointConfig, *, stream: bool) -> str:
        """:func:`url`."""
        return url(endpoint, stream=stream)


GEMINI = VertexGeminiWire()
CLAUDE = VertexClaudeWire()
