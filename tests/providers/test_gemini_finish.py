"""Gemini and Vertex finish and block reasons, each mapped to its decision.

Written from the ``Candidate.FinishReason`` enum of the Gemini API reference
(https://ai.google.dev/api/generate-content#FinishReason) and of Vertex AI's
``Candidate.FinishReason``, which adds ``MODEL_ARMOR``
(https://cloud.google.com/vertex-ai/docs/reference/rest/v1/Candidate#FinishReason).
"""

from __future__ import annotations

import httpx
import pytest

from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, Message
from tests.providers.wire import endpoint, gemini_json, gemini_stream, stream_response

EP = endpoint("gemini-flash")
BUDGETS = Budgets(total_s=5, trailer_grace_s=0.05)
REFUSALS = [
    "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
    "LANGUAGE", "MODEL_ARMOR",
]  # fmt: skip
BAD_TOOL_CALLS = ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"]


def q(stream: bool) -> ChatRequest:
    """A one-message request."""
    return ChatRequest(messages=[Message(role="user", content="q")], stream=stream)


async def _call(mock_client, response: httpx.Response, stream: bool):
    client, _ = mock_client(lambda _: response)
    async with client:
        return await complete(client, EP, q(stream), BUDGETS)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("reason", REFUSALS)
async def test_refusal_reasons_are_content_filter(mock_client, reason, stream):
    """Every documented block reason (Vertex ``MODEL_ARMOR`` too) is a refusal, not an
    empty success that the same route would be retried on (Vertex AI Candidate.FinishReason)."""
    response = (
        stream_response(gemini_stream([""], finish=reason))
        if stream
        else httpx.Response(200, json=gemini_json("", finish=reason))
    )
    with pytest.raises(E.ContentFilterError, match=reason) as info:
        await _call(mock_client, response, stream)
    assert info.value.decision is E.Decision.FAILOVER


@pytest.mark.parametrize("reason", BAD_TOOL_CALLS)
async def test_bad_tool_call_reasons(mock_client, reason):
    """The three tool-call failures of the Gemini FinishReason enum are malformed tool calls."""
    response = httpx.Response(200, json=gemini_json("", finish=reason))
    with pytest.raises(E.MalformedToolCallError, match=reason):
        await _call(mock_client, response, False)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("reason", ["OTHER", "SOMETHING_NEW_2027"])
async def test_unknown_reason_is_an_error_naming_it(mock_client, reason, stream):
    """``OTHER`` and a reason added after this adapter was written are never read as
    ``stop``: the call fails over with an error that names the reason."""
    response = (
        stream_response(gemini_stream(["partial"], finish=reason))
        if stream
        else httpx.Response(200, json=gemini_json("partial", finish=reason))
    )
    with pytest.raises(E.ProviderError, match=reason) as info:
        await _call(mock_client, response, stream)
    assert info.value.decision is E.Decision.FAILOVER
