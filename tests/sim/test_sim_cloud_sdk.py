"""Wire fidelity on the clouds: the official clients talk to the simulator unmodified.

``openai.AsyncAzureOpenAI`` against an Azure deployment, ``boto3``'s ``bedrock-runtime``
(Converse, ConverseStream) with ``endpoint_url``, ``anthropic.AsyncAnthropicBedrock``
(InvokeModel) and ``AsyncAnthropicVertex`` (rawPredict), and google-genai's Vertex client
with a ``base_url`` override, streaming included. Their errors are the SDKs' own types,
and the status, headers and body each SDK saw classify (``classify_status``) to the same
class the project's adapter raises for that fault. boto3 is synchronous: it runs in a
thread so the simulator, on this loop, can answer it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import boto3
import botocore.config
import botocore.exceptions
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from google.oauth2.credentials import Credentials

from agent_failover.providers.classify import classify_status
from agent_failover.resilience import errors as E
from agent_failover.testing.sim.content import END_MARKER

BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_CLAUDE = "claude-sonnet-4-5@20250929"
MESSAGES = [{"role": "user", "content": "Plan a trip to Lisbon"}]
CONVERSE_MESSAGES = [{"role": "user", "content": [{"text": "Plan a trip to Lisbon"}]}]
AKID, SECRET = "AKIASIMULATORTEST01", "sim/secret/key"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def fault(sim, endpoint: str, **spec: Any) -> None:
    async with sim.admin() as admin:
        await admin.set_faults(endpoint, [spec])


def classified(status: int, body: Any, headers: Any) -> type[E.ProviderError]:
    """The class the project's classifier gives what an SDK saw."""
    return type(classify_status(status, body, headers, endpoint="sdk", now=0.0))


# -- Azure OpenAI -------------------------------------------------------------------------


@pytest.fixture
def azure(sim) -> openai.AsyncAzureOpenAI:
    return openai.AsyncAzureOpenAI(
        azure_endpoint=sim.base_url("azure-swedencentral"),
        api_version="2024-10-21",
        api_key="azure-test-key",
        max_retries=0,
    )


async def test_azure_sdk_create_and_stream(azure) -> None:
    """A deployment answers; the stream's prompt-filter chunk and usage parse."""
    plain = await azure.chat.completions.create(model="gpt-41-prod", messages=MESSAGES)
    assert plain.model == "gpt-4.1" and plain.choices[0].finish_reason == "stop"
    assert plain.choices[0].message.content.startswith("[echo: Plan a trip to Lisbon]")
    stream = await azure.chat.completions.create(
        model="gpt-41-prod",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert chunks[0].choices == []  # Azure's prompt_filter_results chunk
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert chunks[-1].usage == plain.usage


async def test_azure_sdk_unknown_deployment_is_not_found(azure) -> None:
    """A deployment the resource does not have is a 404 DeploymentNotFound."""
    with pytest.raises(openai.NotFoundError) as info:
        await azure.chat.completions.create(model="nope", messages=MESSAGES)
    assert info.value.code == "DeploymentNotFound"


@pytest.mark.parametrize(
    ("spec", "exc", "cls"),
    [
        ({"kind": "rate_limit", "retry_after": 3}, openai.RateLimitError, E.RateLimitedError),
        ({"kind": "content_filter"}, openai.BadRequestError, E.ContentFilterError),
        ({"kind": "context_length"}, openai.BadRequestError, E.ContextLengthError),
        ({"kind": "unavailable"}, openai.InternalServerError, E.OverloadedError),
        ({"kind": "auth_error"}, openai.AuthenticationError, E.AuthError),
    ],
)
async def test_azure_sdk_errors_map_to_the_same_classes(sim, azure, spec, exc, cls) -> None:
    """The SDK's exception type, and the project's class for what it saw."""
    await fault(sim, "azure-swedencentral", **spec)
    with pytest.raises(exc) as info:
        await azure.chat.completions.create(model="gpt-41-prod", messages=MESSAGES)
    response = info.value.response
    assert classified(response.status_code, response.content, response.headers) is cls
    if cls is E.RateLimitedError:
        assert response.headers["retry-after-ms"] == "3000"
    if cls is E.ContentFilterError:
        inner = info.value.body["innererror"]
        assert inner["code"] == "ResponsibleAIPolicyViolation"


# -- Bedrock through boto3 ----------------------------------------------------------------


@pytest.fixture
def bedrock(sim) -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-west-2",
        endpoint_url=sim.base_url("bedrock-us-west-2"),
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET,
        config=botocore.config.Config(retries={"total_max_attempts": 1}),
    )


async def test_boto3_converse_and_converse_stream(bedrock) -> None:
    """converse and converse_stream parse; the stream's text and usage match the reply's."""
    plain = await asyncio.to_thread(
        bedrock.converse, modelId=BEDROCK_MODEL, messages=CONVERSE_MESSAGES
    )
    text = plain["output"]["message"]["content"][0]["text"]
    assert plain["stopReason"] == "end_turn" and text.endswith(END_MARKER)

    def stream() -> list[dict[str, Any]]:
        resp = bedrock.converse_stream(modelId=BEDROCK_MODEL, messages=CONVERSE_MESSAGES)
        return list(resp["stream"])

    events = await asyncio.to_thread(stream)
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]
    streamed = "".join(
        e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e
    )
    assert streamed == text
    assert events[-1]["metadata"]["usage"] == plain["usage"]


async def test_boto3_forced_tool_returns_tool_use(bedrock) -> None:
    """A forced tool comes back as a toolUse block with an object input."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    out = await asyncio.to_thread(
        bedrock.converse,
        modelId=BEDROCK_MODEL,
        messages=CONVERSE_MESSAGES,
        toolConfig={
            "tools": [{"toolSpec": {"name": "plan", "inputSchema": {"json": schema}}}],
            "toolChoice": {"tool": {"name": "plan"}},
        },
    )
    use = out["output"]["message"]["content"][0]["toolUse"]
    assert out["stopReason"] == "tool_use" and isinstance(use["input"]["city"], str)


@pytest.mark.parametrize(
    ("spec", "code", "status", "cls"),
    [
        ({"kind": "rate_limit"}, "ThrottlingException", 429, E.RateLimitedError),
        ({"kind": "overloaded"}, "ServiceUnavailableException", 503, E.OverloadedError),
        ({"kind": "quota_exhausted"}, "ServiceQuotaExceededException", 400, E.QuotaExhaustedError),
        ({"kind": "context_length"}, "ValidationException", 400, E.ContextLengthError),
        ({"kind": "server_error"}, "InternalServerException", 500, E.ServerError),
        ({"kind": "auth_error"}, "UnrecognizedClientException", 403, E.AuthError),
    ],
)
async def test_boto3_errors_map_to_the_same_classes(sim, bedrock, spec, code, status, cls) -> None:
    """boto3 names the AWS error; its status, headers and message classify the same way."""
    await fault(sim, "bedrock-us-west-2", **spec)
    with pytest.raises(botocore.exceptions.ClientError) as info:
        await asyncio.to_thread(bedrock.converse, modelId=BEDROCK_MODEL, messages=CONVERSE_MESSAGES)
    err = info.value.response
    assert err["Error"]["Code"] == code
    meta = err["ResponseMetadata"]
    assert meta["HTTPStatusCode"] == status
    body = json.dumps({"message": err["Error"]["Message"]})
    assert classified(status, body, meta["HTTPHeaders"]) is cls


async def test_boto3_in_stream_exception_is_raised(sim, bedrock) -> None:
    """An exception frame inside ConverseStream raises botocore's EventStreamError."""
    await fault(sim, "bedrock-us-west-2", kind="stream_error_event", error_type="rate_limit")

    def drain() -> None:
        resp = bedrock.converse_stream(modelId=BEDROCK_MODEL, messages=CONVERSE_MESSAGES)
        for _ in resp["stream"]:
            pass

    with pytest.raises(botocore.exceptions.EventStreamError) as info:
        await asyncio.to_thread(drain)
    assert info.value.response["Error"]["Code"] == "throttlingException"


async def test_boto3_signature_is_accepted_where_auth_is_required(auth_sim) -> None:
    """boto3's real SigV4 header passes the simulator's shape check."""
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-west-2",
        endpoint_url=auth_sim.base_url("bedrock-us-west-2"),
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET,
        aws_session_token="session-token-sim",
    )
    out = await asyncio.to_thread(
        client.converse, modelId=BEDROCK_MODEL, messages=CONVERSE_MESSAGES
    )
    assert out["stopReason"] == "end_turn"


async def test_boto3_signature_for_another_region_is_refused(auth_sim) -> None:
    """A request signed for another region's scope is a 403 InvalidSignatureException."""
    client = boto3.client(
        "bedrock-runtime",
        region_name="eu-central-1",
        endpoint_url=auth_sim.base_url("bedrock-us-west-2"),
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET,
    )
    with pytest.raises(botocore.exceptions.ClientError) as info:
        await asyncio.to_thread(client.converse, modelId=BEDROCK_MODEL, messages=CONVERSE_MESSAGES)
    assert info.value.response["Error"]["Code"] == "InvalidSignatureException"


# -- Claude through the Anthropic SDK's Bedrock and Vertex clients ------------------------


@pytest.fixture
def claude_bedrock(sim) -> anthropic.AsyncAnthropicBedrock:
    return anthropic.AsyncAnthropicBedrock(
        aws_access_key=AKID,
        aws_secret_key=SECRET,
        aws_region="us-west-2",
        base_url=sim.base_url("bedrock-us-west-2"),
        max_retries=0,
    )


@pytest.fixture
def claude_vertex(sim) -> anthropic.AsyncAnthropicVertex:
    return anthropic.AsyncAnthropicVertex(
        region="europe-west1",
        project_id="sim-project",
        access_token="ya29.sim-test",
        base_url=f"{sim.base_url('vertex-europe-west1')}/v1",
        max_retries=0,
    )


@pytest.mark.parametrize(
    ("client", "model"), [("claude_bedrock", BEDROCK_MODEL), ("claude_vertex", VERTEX_CLAUDE)]
)
async def test_anthropic_cloud_clients_create_and_stream(request, client, model) -> None:
    """messages.create and messages.stream agree (InvokeModel event-stream / streamRawPredict)."""
    sdk = request.getfixturevalue(client)
    plain = await sdk.messages.create(model=model, max_tokens=300, messages=MESSAGES)
    async with sdk.messages.stream(model=model, max_tokens=300, messages=MESSAGES) as s:
        chunks = [t async for t in s.text_stream]
        final = await s.get_final_message()
    assert "".join(chunks) == plain.content[0].text == final.content[0].text
    assert (
        final.stop_reason == "end_turn" and final.usage.output_tokens == plain.usage.output_tokens
    )


CB, CV = ("claude_bedrock", "bedrock-us-west-2"), ("claude_vertex", "vertex-europe-west1")


@pytest.mark.parametrize(
    ("client", "endpoint", "spec", "exc", "cls"),
    [
        (*CB, {"kind": "rate_limit"}, anthropic.RateLimitError, E.RateLimitedError),
        (*CB, {"kind": "overloaded"}, anthropic.InternalServerError, E.OverloadedError),
        (*CV, {"kind": "overloaded"}, anthropic.InternalServerError, E.OverloadedError),
        (
            *CV,
            {"kind": "rate_limit", "retry_after": 4},
            anthropic.RateLimitError,
            E.RateLimitedError,
        ),
        (*CV, {"kind": "context_length"}, anthropic.BadRequestError, E.ContextLengthError),
    ],
)
async def test_anthropic_cloud_client_errors_map_to_the_same_classes(
    request, sim, client, endpoint, spec, exc, cls
) -> None:
    """The SDK's exception type, and the project's class for what it saw."""
    sdk = request.getfixturevalue(client)
    model = BEDROCK_MODEL if client == "claude_bedrock" else VERTEX_CLAUDE
    await fault(sim, endpoint, **spec)
    with pytest.raises(exc) as info:
        await sdk.messages.create(model=model, max_tokens=50, messages=MESSAGES)
    response = info.value.response
    assert classified(response.status_code, response.content, response.headers) is cls


async def test_anthropic_bedrock_in_stream_exception_raises(sim, claude_bedrock) -> None:
    """An exception frame in InvokeModelWithResponseStream surfaces as an SDK error."""
    await fault(sim, "bedrock-us-west-2", kind="stream_error_event", after_tokens=3)
    with pytest.raises(anthropic.APIStatusError) as info:
        async with claude_bedrock.messages.stream(
            model=BEDROCK_MODEL, max_tokens=300, messages=MESSAGES
        ) as s:
            async for _ in s.text_stream:
                pass
    assert "serviceUnavailableException" in str(info.value)


# -- Gemini through google-genai's Vertex client ------------------------------------------


@pytest.fixture
def gemini_vertex(sim) -> genai.Client:
    return genai.Client(
        vertexai=True,
        project="sim-project",
        location="europe-west1",
        credentials=Credentials(token="ya29.sim-test"),
        http_options=genai_types.HttpOptions(
            base_url=sim.base_url("vertex-europe-west1"), api_version="v1"
        ),
    )


async def test_genai_vertex_generate_and_stream(gemini_vertex) -> None:
    """generate_content and generate_content_stream parse the simulator's responses."""
    plain = await gemini_vertex.aio.models.generate_content(
        model="gemini-2.5-flash", contents="Plan a trip to Lisbon"
    )
    assert plain.text.startswith("[echo: Plan a trip to Lisbon]")
    stream = await gemini_vertex.aio.models.generate_content_stream(
        model="gemini-2.5-flash", contents="Plan a trip to Lisbon"
    )
    assert "".join([c.text or "" async for c in stream]) == plain.text


@pytest.mark.parametrize(
    ("spec", "code", "cls"),
    [
        ({"kind": "rate_limit", "retry_after": 7}, 429, E.RateLimitedError),
        ({"kind": "unavailable"}, 503, E.OverloadedError),
        ({"kind": "context_length"}, 400, E.ContextLengthError),
    ],
)
async def test_genai_vertex_errors_map_to_the_same_classes(sim, gemini_vertex, spec, code, cls):
    """google-genai's APIError carries the Google status; the body classifies the same way."""
    await fault(sim, "vertex-europe-west1", **spec)
    with pytest.raises(genai_errors.APIError) as info:
        await gemini_vertex.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert info.value.code == code
    body = json.dumps({"error": info.value.details["error"]})
    assert classified(code, body, {}) is cls
