"""Google Vertex AI: regional publisher models, Gemini and Claude, behind a bearer token.

Path (after ``/<endpoint>/``):
``v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}``
(``v1beta1`` too, as google-genai uses). ``location`` must be the endpoint's region, as a
regional host only serves its own location. Publisher ``google`` speaks Gemini
(``generateContent``, ``streamGenerateContent`` with or without ``alt=sse``); publisher
``anthropic`` speaks the Anthropic Messages body with an ``anthropic_version``
(``vertex-2023-10-16``) and no ``model`` (``rawPredict``, ``streamRawPredict``), with Claude's
own error bodies except for quota, which Vertex enforces in Google's format
(``429 RESOURCE_EXHAUSTED``). Auth is ``Authorization: Bearer`` (an OAuth access token).
"""

from __future__ import annotations

import re
from typing import Any

from agent_failover.resilience.endpoint import ProviderKind
from agent_failover.testing.sim.config import SimEndpoint
from agent_failover.testing.sim.content import ParsedRequest
from agent_failover.testing.sim.wire.anthropic import AnthropicWire
from agent_failover.testing.sim.wire.base import ErrorCategory, Operation, SimError, WireFormat
from agent_failover.testing.sim.wire.gemini import GeminiWire

_PATH = re.compile(
    r"^v1(?:beta1)?/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
    r"/publishers/(?P<publisher>google|anthropic)/models/(?P<model>[^/:]+)"
    r":(?P<method>generateContent|streamGenerateContent|rawPredict|streamRawPredict)$"
)
_METHODS = {
    "google": ("generateContent", "streamGenerateContent"),
    "anthropic": ("rawPredict", "streamRawPredict"),
}


def _bearer(headers: Any) -> bool:
    auth = str(headers.get("authorization", ""))
    return auth.lower().startswith("bearer ") and len(auth) > len("bearer ")


def check_location(op: Operation, endpoint: SimEndpoint) -> None:
    """A regional host serves only its own location."""
    location = (op.variant or "@").split("@", 1)[1]
    if location != endpoint.region:
        raise SimError(
            ErrorCategory.INVALID_REQUEST,
            f"Location {location} is not served by this regional endpoint ({endpoint.region}).",
        )


class VertexGeminiWire(GeminiWire):
    """Gemini on Vertex: the Gemini API's bodies and errors, OAuth instead of a key."""

    def authenticated(self, headers: Any, query: dict[str, str]) -> bool:
        """An OAuth bearer token."""
        return _bearer(headers)

    def parse(self, body: Any, op: Operation, endpoint: SimEndpoint) -> ParsedRequest:
        """A GenerateContentRequest sent to this endpoint's own location."""
        check_location(op, endpoint)
        return super().parse(body, op, endpoint)


class VertexAnthropicWire(AnthropicWire):
    """Claude on Vertex: rawPredict / streamRawPredict."""

    def authenticated(self, headers: Any, query: dict[str, str]) -> bool:
        """An OAuth bearer token."""
        return _bearer(headers)

    def parse(self, body: Any, op: Operation, endpoint: SimEndpoint) -> ParsedRequest:
        """The Messages body without ``model`` and with Vertex's ``anthropic_version``."""
        check_location(op, endpoint)
        if not isinstance(body, dict):
            raise SimError(ErrorCategory.INVALID_REQUEST, "request body must be a JSON object")
        # The SDKs send their own version strings; what Vertex insists on is presence.
        if not isinstance(body.get("anthropic_version"), str) or not body["anthropic_version"]:
            raise SimError(ErrorCategory.INVALID_REQUEST, "anthropic_version: Field required")
        parsed = super().parse({**body, "model": op.path_model}, op, endpoint)
        parsed.stream = parsed.stream and op.path_stream is True
        return parsed

    def error_body(self, err: SimError, status: int, model: str | None) -> dict[str, Any]:
        """Quota is Vertex's (Google format); everything else is Claude's."""
        if err.category in (ErrorCategory.RATE_LIMIT, ErrorCategory.QUOTA):
            return GEMINI.error_body(err, status, model)
        return super().error_body(err, status, model)


GEMINI = VertexGeminiWire()
ANTHROPIC = VertexAnthropicWire()


class VertexWire(GeminiWire):
    """Routes a Vertex path to the publisher's wire (Gemini answers route-level errors)."""

    kind = ProviderKind.GEMINI

    def route(self, method: str, tail: str, query: dict[str, str]) -> Operation | None:
        """``POST v1/projects/…/locations/…/publishers/…/models/{model}:{method}``."""
        m = _PATH.match(tail)
        if method != "POST" or m is None:
            return None
        publisher, verb = m["publisher"], m["method"]
        if verb not in _METHODS[publisher]:
            return None
        return Operation(
            "complete",
            path_model=m["model"],
            path_stream=verb == _METHODS[publisher][1],
            sse=query.get("alt") == "sse" if publisher == "google" else True,
            variant=f"{publisher}@{m['location']}",
        )

    def for_operation(self, op: Operation) -> WireFormat:
        """The publisher's wire."""
        return ANTHROPIC if (op.variant or "").startswith("anthropic@") else GEMINI

    def authenticated(self, headers: Any, query: dict[str, str]) -> bool:
        """An OAuth bearer token."""
        return _bearer(headers)
