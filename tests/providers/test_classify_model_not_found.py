"""Real error replies whose decision is about the route, not the request.

A model id the provider does not serve is the route's misconfiguration: the call fails
over and the route's breaker opens with reason ``model_not_found``. A 400 carrying the
model's own broken tool call is a malformed tool call, as its streaming form is.
"""

from __future__ import annotations

import json

import httpx
import pytest

from agent_failover.providers.classify import classify_status
from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, Message
from tests.providers.wire import endpoint

NOW = 1_750_000_000.0
AWS_TYPE = "x-amzn-ErrorType"

# Anthropic, https://docs.anthropic.com/en/api/errors: 404 not_found_error.
ANTHROPIC_404 = {
    "type": "error",
    "error": {"type": "not_found_error", "message": "model: claude-sonnet-9"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
}
# OpenAI, https://platform.openai.com/docs/guides/error-codes (404, code model_not_found).
OPENAI_404 = {
    "error": {
        "message": "The model `gpt-9` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
}
# Gemini, https://ai.google.dev/gemini-api/docs/troubleshooting: 404 NOT_FOUND.
GEMINI_404 = {
    "error": {
        "code": 404,
        "message": "models/gemini-9-flash is not found for API version v1beta, or is not "
        "supported for generateContent. Call ListModels to see the list of available models "
        "and their supported methods.",
        "status": "NOT_FOUND",
    }
}


def status(code, body, headers=None):
    """classify_status with a fixed endpoint and clock."""
    text = body if isinstance(body, str) else json.dumps(body)
    return classify_status(code, text, headers, endpoint="ep", now=NOW)


@pytest.mark.parametrize(
    ("code", "body", "headers"),
    [
        (404, ANTHROPIC_404, None),
        (404, OPENAI_404, None),
        (404, GEMINI_404, None),
        # Bedrock Converse, https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_Errors
        (
            400,
            {"message": "The provided model identifier is invalid."},
            {AWS_TYPE: "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        ),
        (
            404,
            {"message": "Model not found."},
            {AWS_TYPE: "ResourceNotFoundException:http://internal.amazon.com/coral/"},
        ),
        # An OpenAI-compatible server (vLLM) answers an unknown model with 400 or 404 and
        # OpenAI's error object.
        (
            400,
            {"error": {"message": "unknown model 'x'", "code": "model_not_found"}},
            None,
        ),
    ],
    ids=["anthropic", "openai", "gemini", "bedrock-validation", "bedrock-not-found", "compat"],
)
def test_model_not_found_fails_over_as_misconfigured(code, body, headers):
    """Each vendor's "no such model" is the route's fault: not a STOP for the whole call."""
    err = status(code, body, headers)
    assert type(err) is E.ModelNotFoundError
    assert err.decision is not E.Decision.STOP and not err.retryable
    assert err.classification.counts_against_route


def test_other_bedrock_validation_errors_still_stop():
    """A ValidationException about the request itself (not the model id) is the caller's."""
    err = status(400, {"message": "messages: field required"}, {AWS_TYPE: "ValidationException"})
    assert type(err) is E.InvalidRequestError and err.decision is E.Decision.STOP


async def test_gemini_404_through_the_adapter(mock_client):
    """The Gemini adapter's 404 NOT_FOUND leaves as a model-not-found error naming the route."""
    client, _ = mock_client(lambda _: httpx.Response(404, json=GEMINI_404))
    request = ChatRequest(messages=[Message(role="user", content="q")], stream=False)
    async with client:
        with pytest.raises(E.ModelNotFoundError, match="gemini-9-flash") as info:
            await complete(client, endpoint("gemini-flash"), request, Budgets(total_s=5))
    assert info.value.endpoint == "gemini-flash"


def test_groq_tool_use_failed_is_a_malformed_tool_call():
    """Groq's 400 ``tool_use_failed`` carrying ``failed_generation``
    (https://console.groq.com/docs/tool-use, "Error handling") is the model's bad tool
    call: the same decision as a malformed call in a 200 reply, not a STOP."""
    body = {
        "error": {
            "message": "Failed to call a function. Please adjust your prompt. See "
            "'failed_generation' for more details.",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "failed_generation": '<function=search{"q": "x"}</function>',
        }
    }
    err = status(400, body)
    assert type(err) is E.MalformedToolCallError
    streamed = E.MalformedToolCallError("x", endpoint="ep", status=200)
    assert err.decision is streamed.decision is E.Decision.FAILOVER
