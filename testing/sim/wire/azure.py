"""Azure OpenAI: Chat Completions on a deployment, ``?api-version=`` required.

Path (after ``/<endpoint>/``): ``openai/deployments/{deployment}/chat/completions``; the
deployment names the model (``SimEndpoint.deployments``), a missing ``api-version`` is a
404 as Azure answers it, and auth is the ``api-key`` header or an Entra ID bearer token.
Replies are OpenAI's plus Azure's filter annotations (``prompt_filter_results``, a first
stream chunk with no choices, ``content_filter_results`` per choice). Errors use Azure's
shapes: ``{"error": {"code": "429", "message": "... Please retry after N seconds."}}``
with ``retry-after-ms``, and a content-filter 400 whose ``innererror.code`` is
``ResponsibleAIPolicyViolation``.
"""

from __future__ import annotations

import re
from typing import Any

from agent_failover.testing.sim.config import SimEndpoint
from agent_failover.testing.sim.content import ParsedRequest, Reply
from agent_failover.testing.sim.wire.base import ErrorCategory, Operation, SimError, sse
from agent_failover.testing.sim.wire.openai import OpenAIWire

_PATH = re.compile(r"^openai/deployments/(?P<deployment>[^/]+)/chat/completions$")
_FILTER_OK = {
    category: {"filtered": False, "severity": "safe"}
    for category in ("hate", "self_harm", "sexual", "violence")
}
_CODES = {
    ErrorCategory.RATE_LIMIT: "429",
    ErrorCategory.QUOTA: "insufficient_quota",
    ErrorCategory.AUTH: "401",
    ErrorCategory.PERMISSION: "PermissionDenied",
    ErrorCategory.NOT_FOUND: "DeploymentNotFound",
    ErrorCategory.CONTENT_FILTER: "content_filter",
}


class AzureOpenAIWire(OpenAIWire):
    """Azure OpenAI deployments."""

    #: How a rate-limit wait is said when only reset headers may say it.
    reset_style = "azure"

    def route(self, method: str, tail: str, query: dict[str, str]) -> Operation | None:
        """``POST openai/deployments/{deployment}/chat/completions`` with ``api-version``."""
        m = _PATH.match(tail)
        if method != "POST" or m is None:
            return None
        if not query.get("api-version"):
            return None  # Azure answers 404 "Resource not found" without one
        return Operation("complete", path_model=m["deployment"])

    def authenticated(self, headers: Any, query: dict[str, str]) -> bool:
        """``api-key`` or ``Authorization: Bearer`` (Entra ID)."""
        bearer = str(headers.get("authorization", "")).lower().startswith("bearer ")
        return bool(headers.get("api-key")) or bearer

    def request_id_header(self) -> str:
        """Azure's request id header."""
        return "apim-request-id"

    def parse(self, body: Any, op: Operation, endpoint: SimEndpoint) -> ParsedRequest:
        """The OpenAI body; the model is the deployment's (``model`` in the body is optional)."""
        deployment = op.path_model or ""
        model = endpoint.deployment_model(deployment)
        if model is None:
            raise SimError(
                ErrorCategory.NOT_FOUND,
                "The API deployment for this resource does not exist. If you created the "
                "deployment within the last 5 minutes, please wait a moment and try again.",
            )
        payload = {**body, "model": model} if isinstance(body, dict) else body
        return super().parse(payload, op, endpoint)

    def error_body(self, err: SimError, status: int, model: str | None) -> dict[str, Any]:
        """Azure's error object: string codes, ``innererror`` for content filters."""
        body = super().error_body(err, status, model)
        error = body["error"]
        if err.category in _CODES:
            error["code"] = _CODES[err.category]
        if err.category is ErrorCategory.RATE_LIMIT:
            wait = int(err.retry_after) if err.retry_after is not None else 1
            error["message"] = (
                "Requests to the ChatCompletions_Create Operation under Azure OpenAI API "
                "have exceeded token rate limit of your current pricing tier. "
                f"Please retry after {wait} seconds."
            )
        if err.category is ErrorCategory.CONTENT_FILTER:
            error["message"] = (
                "The response was filtered due to the prompt triggering Azure OpenAI's "
                "content management policy."
            )
            error["param"] = "prompt"
            error["status"] = 400
            error["innererror"] = {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": {
                    **_FILTER_OK,
                    "violence": {"filtered": True, "severity": "high"},
                },
            }
        return body

    def response(self, reply: Reply) -> dict[str, Any]:
        """A chat.completion with Azure's filter results."""
        body = super().response(reply)
        body["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": _FILTER_OK}]
        body["choices"][0]["content_filter_results"] = _FILTER_OK
        return body

    def stream_prelude(self, reply: Reply) -> list[bytes]:
        """Azure's prompt-filter chunk (no choices) before OpenAI's role chunk."""
        filters = {
            "id": "",
            "object": "",
            "created": 0,
            "model": "",
            "choices": [],
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _FILTER_OK}],
        }
        return [sse(filters), *super().stream_prelude(reply)]
