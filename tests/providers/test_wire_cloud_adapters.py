"""What the cloud adapters put on the wire and how they read it (MockTransport).

Bedrock: the escaped model id in the path, the Converse body, a SigV4 signature that
verifies over the exact bytes sent, tool and forced-JSON streams, exception frames,
broken framing, missing extras and credentials. Azure: the deployment URL with its
``api-version``, the ``api-key`` header, an Entra ID bearer token. Vertex: regional URLs
for both publishers and the rawPredict body. Any endpoint: extra headers and query
parameters, secret headers from the environment.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import pytest

from agent_failover.providers.auth import AzureTokenSource, CredentialStore
from agent_failover.providers.auth import attach_credentials as attach
from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.endpoint import Capabilities
from agent_failover.resilience.models import ChatRequest, Message, ToolSpec
from agent_failover.testing.sim.wire import eventstream as es
from agent_failover.testing.sim.wire.bedrock import sigv4_problem
from tests.providers.wire import (
    SENTINEL_KEY,
    bedrock_json,
    bedrock_stream,
    endpoint,
    gemini_json,
    openai_json,
    stream_response,
)

FAST = Budgets(connect_s=0.5, ttft_s=0.5, idle_s=0.5, total_s=2.0, trailer_grace_s=0.05)
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def ask(stream: bool = False, **kw: Any) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content="hi")], stream=stream, **kw)


async def call(mock_client, ep, respond, req: ChatRequest, store: CredentialStore | None = None):
    client, recorder = mock_client(respond)
    if store is not None:
        attach(client, store)
    async with client:
        return await complete(client, ep, req, FAST), recorder


# -- Bedrock ------------------------------------------------------------------------------


async def test_bedrock_request_shape(mock_client) -> None:
    """Converse URL with the model id fully escaped, body fields, API key as bearer."""
    ep = endpoint("bedrock-us-west-2")
    req = ask(system="be brief", temperature=1.5, stop=["END"], max_tokens=99)
    reply, rec = await call(
        mock_client, ep, lambda _: httpx.Response(200, json=bedrock_json("ok")), req
    )
    sent = rec.requests[0]
    assert sent.url.raw_path.decode().endswith(
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    )
    body = json.loads(sent.content)
    assert body["system"] == [{"text": "be brief"}]
    assert body["inferenceConfig"] == {
        "maxTokens": 99,
        "temperature": 1.0,
        "stopSequences": ["END"],
    }
    assert body["messages"] == [{"role": "user", "content": [{"text": "hi"}]}]
    assert sent.headers["authorization"] == f"Bearer {SENTINEL_KEY}"
    assert reply.text == "ok" and reply.usage.input_tokens == 100 and reply.cost_usd > 0


async def test_bedrock_forced_json_and_tool_calls(mock_client) -> None:
    """Without native structured output a schema becomes a forced tool whose input is the
    answer; other tools are tool calls."""
    ep = endpoint("bedrock-us-west-2", capabilities=Capabilities(native_json_schema=False))
    forced = bedrock_json("", stop="tool_use", blocks=[
        {"toolUse": {"toolUseId": "t1", "name": "structured_output", "input": {"a": "x"}}}
    ])  # fmt: skip
    reply, rec = await call(
        mock_client, ep, lambda _: httpx.Response(200, json=forced), ask(json_schema=SCHEMA)
    )
    body = json.loads(rec.requests[0].content)
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "structured_output"}}
    assert json.loads(reply.text) == {"a": "x"} and reply.finish_reason.value == "stop"

    frames = [
        es.event("messageStart", {"role": "assistant"}),
        es.event(
            "contentBlockStart",
            {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t9", "name": "look"}}},
        ),
        es.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": tool_input('{"q"')}),
        es.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": tool_input(": 1}")}),
        es.event("messageStop", {"stopReason": "tool_use"}),
        es.event("metadata", {"usage": {"inputTokens": 5, "outputTokens": 7}}),
    ]  # fmt: skip
    tool = ToolSpec(name="look", parameters={"type": "object"})
    reply, _ = await call(
        mock_client, ep, lambda _: stream_response(frames), ask(stream=True, tools=[tool])
    )
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("t9", "look", {"q": 1})]
    assert reply.finish_reason.value == "tool_calls" and reply.usage.output_tokens == 7


def tool_input(fragment: str) -> dict[str, Any]:
    return {"toolUse": {"input": fragment}}


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("auto", {"auto": {}}), ("required", {"any": {}}), ("look", {"tool": {"name": "look"}})],
)
async def test_bedrock_tool_choice(mock_client, choice, expected) -> None:
    """tool_choice maps to Converse's toolChoice."""
    tool = ToolSpec(name="look", parameters={"type": "object"})
    _, rec = await call(
        mock_client,
        endpoint("bedrock-us-west-2"),
        lambda _: httpx.Response(200, json=bedrock_json("ok")),
        ask(tools=[tool], tool_choice=choice),
    )
    config = json.loads(rec.requests[0].content)["toolConfig"]
    assert config["toolChoice"] == expected and config["tools"][0]["toolSpec"]["name"] == "look"


async def test_bedrock_stream_text_and_usage(mock_client) -> None:
    """Event-stream frames, split anywhere, fold into text, usage and a TTFT."""
    raw = b"".join(bedrock_stream(["Hel", "lo"]))
    chunks = [raw[i : i + 7] for i in range(0, len(raw), 7)]
    reply, _ = await call(
        mock_client, endpoint("bedrock-us-west-2"), lambda _: stream_response(chunks), ask(True)
    )
    assert reply.text == "Hello" and reply.usage.input_tokens == 100
    assert reply.ttft_ms is not None and reply.malformed_events_skipped == 0


@pytest.mark.parametrize(
    ("kind", "decision"),
    [
        ("throttlingException", E.Decision.COOLDOWN),
        ("serviceUnavailableException", E.Decision.COOLDOWN),
        ("modelStreamErrorException", E.Decision.FAILOVER),
        ("validationException", E.Decision.FAILOVER),
    ],
)
async def test_bedrock_exception_frames(mock_client, kind, decision) -> None:
    """An exception frame mid-stream is a StreamErrorEvent keeping the text so far."""
    frames = [*bedrock_stream(["Hello "])[:2], es.exception(kind, "nope")]
    with pytest.raises(E.StreamErrorEvent) as info:
        await call(
            mock_client, endpoint("bedrock-us-west-2"), lambda _: stream_response(frames), ask(True)
        )
    assert info.value.decision is decision and info.value.partial_text == "Hello "
    assert kind in str(info.value)


async def test_bedrock_broken_checksum_fails_at_once(mock_client) -> None:
    """A frame whose CRC does not match fails the stream as malformed, without waiting."""
    frames = bedrock_stream(["Hello ", "world"])
    bad = bytearray(frames[2])
    bad[-1] ^= 0xFF
    sent = [frames[0], frames[1], bytes(bad), *frames[3:]]
    with pytest.raises(E.MalformedStreamError, match="ChecksumMismatch") as info:
        await call(
            mock_client, endpoint("bedrock-us-west-2"), lambda _: stream_response(sent), ask(True)
        )
    assert info.value.partial_text == "Hello "


async def test_bedrock_without_botocore_names_the_extra(mock_client, monkeypatch) -> None:
    """A missing optional dependency is an AuthError naming the extra; nothing is sent."""
    monkeypatch.setitem(sys.modules, "botocore.eventstream", None)
    client, rec = mock_client(lambda _: httpx.Response(200, json=bedrock_json("ok")))
    async with client:
        with pytest.raises(E.AuthError, match=r"agent-failover\[bedrock\]"):
            await complete(client, endpoint("bedrock-us-west-2"), ask(True), FAST)
    assert rec.requests == []


def _aws_env(monkeypatch, tmp_path, **values: str) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for k, v in values.items():
        monkeypatch.setenv(k, v)


async def test_sigv4_signature_verifies_over_the_bytes_sent(mock_client, monkeypatch, tmp_path):
    """botocore's chain (env) signs the exact URL and body httpx sends; the token is secret."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    _aws_env(
        monkeypatch, tmp_path,
        AWS_ACCESS_KEY_ID="AKIASIGV4TEST000001", AWS_SECRET_ACCESS_KEY="s3cr3t",
        AWS_SESSION_TOKEN="session-" + SENTINEL_KEY,
    )  # fmt: skip
    ep = endpoint("bedrock-us-west-2", api_key_env=None, auth="aws_sigv4")
    _, rec = await call(
        mock_client,
        ep,
        lambda _: httpx.Response(200, json=bedrock_json("ok")),
        ask(),
        CredentialStore(),
    )
    sent = rec.requests[0]
    assert sigv4_problem(sent.headers, "us-west-2") is None
    assert sent.headers["x-amz-security-token"] == "session-" + SENTINEL_KEY
    # Recompute the signature from what went over the wire, at the request's own timestamp.
    aws = AWSRequest("POST", str(sent.url), data=sent.content, headers={
        "host": sent.headers["host"], "content-type": sent.headers["content-type"],
        "x-amz-date": sent.headers["x-amz-date"],
        "X-Amz-Security-Token": sent.headers["x-amz-security-token"],
    })  # fmt: skip
    aws.context["timestamp"] = sent.headers["x-amz-date"]
    signer = SigV4Auth(
        Credentials("AKIASIGV4TEST000001", "s3cr3t", "session-x"), "bedrock", "us-west-2"
    )
    expected = signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws)
    assert sent.headers["authorization"].endswith(f"Signature={expected}")


async def test_sigv4_without_credentials_is_auth_error(mock_client, monkeypatch, tmp_path):
    """An empty credential chain fails the route as AuthError before anything is sent."""
    _aws_env(monkeypatch, tmp_path)
    ep = endpoint("bedrock-us-west-2", api_key_env=None, auth="aws_sigv4")
    client, rec = mock_client(lambda _: httpx.Response(200, json=bedrock_json("ok")))
    attach(client, CredentialStore())
    async with client:
        with pytest.raises(E.AuthError, match="no AWS credentials"):
            await complete(client, ep, ask(), FAST)
    assert rec.requests == []


# -- Azure OpenAI -------------------------------------------------------------------------


async def test_azure_url_key_header_and_extras(mock_client) -> None:
    """Deployment URL, api-version, api-key header; extra headers and query merged in."""
    ep = endpoint(
        "azure-swedencentral",
        api_version="2025-01-01-preview",
        headers={"x-ms-client-request-id": "abc"},
        query={"trace": "1"},
    )
    reply, rec = await call(
        mock_client, ep, lambda _: httpx.Response(200, json=openai_json("ok")), ask()
    )
    sent = rec.requests[0]
    assert sent.url.path == "/azure-swedencentral/openai/deployments/gpt-41-prod/chat/completions"
    assert dict(sent.url.params) == {"api-version": "2025-01-01-preview", "trace": "1"}
    assert sent.headers["api-key"] == SENTINEL_KEY and "authorization" not in sent.headers
    assert sent.headers["x-ms-client-request-id"] == "abc"
    assert "max_completion_tokens" in json.loads(sent.content) and reply.text == "ok"


class FakeAzureCredential:
    """Stands in for DefaultAzureCredential: counts get_token calls."""

    def __init__(self, token: str, expires_on: float) -> None:
        self.token, self.expires_on, self.calls = token, expires_on, []

    def get_token(self, *scopes: str) -> Any:
        self.calls.append(scopes)
        from azure.core.credentials import AccessToken as AzureAccessToken

        return AzureAccessToken(self.token, int(self.expires_on))


async def test_azure_entra_id_bearer(mock_client) -> None:
    """auth: entra_id sends the credential's token for the Cognitive Services scope."""
    cred = FakeAzureCredential("entra-" + SENTINEL_KEY, expires_on=4e9)
    store = CredentialStore(azure=_AzureAdapter(cred))
    ep = endpoint("azure-swedencentral", api_key_env=None, auth="entra_id")
    _, rec = await call(
        mock_client, ep, lambda _: httpx.Response(200, json=openai_json("ok")), ask(), store
    )
    assert rec.requests[0].headers["authorization"] == "Bearer entra-" + SENTINEL_KEY
    assert cred.calls == [("https://cognitiveservices.azure.com/.default",)]


class _AzureAdapter(AzureTokenSource):
    def __init__(self, cred: FakeAzureCredential) -> None:
        super().__init__(credential=cred)


async def test_entra_token_echoed_in_error_is_redacted(mock_client) -> None:
    """A bearer token a provider echoes back never reaches the error text."""
    cred = FakeAzureCredential("entra-" + SENTINEL_KEY, expires_on=4e9)
    ep = endpoint("azure-swedencentral", api_key_env=None, auth="entra_id")
    body = {"error": {"code": "401", "message": f"bad token entra-{SENTINEL_KEY}"}}
    with pytest.raises(E.AuthError) as info:
        await call(
            mock_client,
            ep,
            lambda _: httpx.Response(401, json=body),
            ask(),
            CredentialStore(azure=_AzureAdapter(cred)),
        )
    assert SENTINEL_KEY not in str(info.value) and "[redacted]" in str(info.value)


# -- Vertex AI ----------------------------------------------------------------------------


async def test_vertex_claude_url_and_body(mock_client) -> None:
    """Claude on Vertex: streamRawPredict under the region, no model in the body."""
    from tests.providers.wire import anthropic_stream

    ep = endpoint("vertex-europe-west1")
    reply, rec = await call(
        mock_client, ep, lambda _: stream_response(anthropic_stream(["Hi"])), ask(True)
    )
    sent = rec.requests[0]
    assert sent.url.path == (
        "/vertex-europe-west1/v1/projects/sim-project/locations/europe-west1"
        "/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    )
    body = json.loads(sent.content)
    assert "model" not in body and body["anthropic_version"] == "vertex-2023-10-16"
    assert body["stream"] is True and sent.headers["x-goog-api-key"] == SENTINEL_KEY
    assert reply.text == "Hi"


async def test_vertex_gemini_regional_url_derived(mock_client) -> None:
    """Without base_url a Vertex route posts to {region}-aiplatform.googleapis.com."""
    ep = endpoint("vertex-gemini", base_url=None)
    _, rec = await call(
        mock_client, ep, lambda _: httpx.Response(200, json=gemini_json("ok")), ask()
    )
    assert str(rec.requests[0].url) == (
        "https://europe-west1-aiplatform.googleapis.com/v1/projects/sim-project/locations/"
        "europe-west1/publishers/google/models/gemini-2.5-flash:generateContent"
    )
    glob = endpoint("vertex-gemini", base_url=None, region="global")
    assert glob.base() == "https://aiplatform.googleapis.com"


# -- any endpoint -------------------------------------------------------------------------


async def test_secret_header_from_env_is_read_at_call_time(mock_client, monkeypatch) -> None:
    """headers_from_env: the value comes from the environment; unset is an AuthError."""
    monkeypatch.setenv("GATEWAY_TOKEN", "gw-" + SENTINEL_KEY)
    ep = endpoint(
        "openai-us",
        headers={"HTTP-Referer": "https://example.org"},
        headers_from_env={"cf-aig-authorization": "GATEWAY_TOKEN"},
    )
    _, rec = await call(
        mock_client, ep, lambda _: httpx.Response(200, json=openai_json("ok")), ask()
    )
    sent = rec.requests[0].headers
    assert sent["cf-aig-authorization"] == "gw-" + SENTINEL_KEY
    assert sent["http-referer"] == "https://example.org"
    assert sent["authorization"] == f"Bearer {SENTINEL_KEY}"
    monkeypatch.delenv("GATEWAY_TOKEN")
    with pytest.raises(E.AuthError, match="GATEWAY_TOKEN"):
        await call(mock_client, ep, lambda _: None, ask())
    assert SENTINEL_KEY not in repr(ep) and "GATEWAY_TOKEN" in repr(ep)
