"""Wire fidelity: the official anthropic and openai SDKs talk to the simulator unmodified."""

from __future__ import annotations

import json

import anthropic
import jsonschema
import openai
import pytest

from agent_failover.testing.sim.content import END_MARKER

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
MODEL_A = "claude-sonnet-4-5"
MODEL_O = "gpt-4.1"
MESSAGES = [{"role": "user", "content": "Plan a trip to Lisbon"}]

# The SDK warns that this model name is deprecated; the name is a fixed project fact.
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


@pytest.fixture
def claude(sim):
    """An AsyncAnthropic client pointed at anthropic-us-east with retries off."""
    return anthropic.AsyncAnthropic(
        base_url=sim.base_url("anthropic-us-east"), api_key="sk-ant-test", max_retries=0
    )


@pytest.fixture
def gpt(sim):
    """An AsyncOpenAI client pointed at openai-us with retries off."""
    return openai.AsyncOpenAI(base_url=sim.base_url("openai-us"), api_key="sk-test", max_retries=0)


async def fault(sim, endpoint: str, **spec) -> None:
    async with sim.admin() as admin:
        await admin.set_faults(endpoint, [spec])


async def test_anthropic_sdk_create(claude):
    """messages.create parses the simulator's message."""
    msg = await claude.messages.create(model=MODEL_A, max_tokens=300, messages=MESSAGES)
    assert msg.stop_reason == "end_turn"
    assert msg.content[0].text.startswith("[echo: Plan a trip to Lisbon]")
    assert msg.usage.output_tokens == -(-len(msg.content[0].text) // 4)


async def test_anthropic_sdk_stream(claude):
    """messages.stream accumulates the same text and usage as the non-streamed call."""
    plain = await claude.messages.create(model=MODEL_A, max_tokens=300, messages=MESSAGES)
    async with claude.messages.stream(model=MODEL_A, max_tokens=300, messages=MESSAGES) as s:
        chunks = [t async for t in s.text_stream]
        final = await s.get_final_message()
    assert "".join(chunks) == plain.content[0].text == final.content[0].text
    assert final.usage.output_tokens == plain.usage.output_tokens
    assert final.stop_reason == "end_turn" and final.content[0].text.endswith(END_MARKER)


async def test_anthropic_sdk_forced_tool(claude):
    """A forced tool call comes back as a parsed tool_use block matching the schema."""
    msg = await claude.messages.create(
        model=MODEL_A,
        max_tokens=300,
        messages=MESSAGES,
        tools=[{"name": "plan", "description": "plan", "input_schema": SCHEMA}],
        tool_choice={"type": "tool", "name": "plan"},
    )
    assert msg.stop_reason == "tool_use" and msg.content[0].type == "tool_use"
    jsonschema.validate(msg.content[0].input, SCHEMA)


@pytest.mark.parametrize(
    ("spec", "exc", "status"),
    [
        ({"kind": "rate_limit", "retry_after": 3}, anthropic.RateLimitError, 429),
        ({"kind": "overloaded"}, anthropic.InternalServerError, 529),
        ({"kind": "unavailable"}, anthropic.InternalServerError, 503),
        ({"kind": "server_error"}, anthropic.InternalServerError, 500),
        ({"kind": "context_length"}, anthropic.BadRequestError, 400),
        ({"kind": "auth_error"}, anthropic.AuthenticationError, 401),
    ],
)
async def test_anthropic_sdk_error_types(sim, claude, spec, exc, status):
    """The SDK raises its own exception type for each simulated status."""
    await fault(sim, "anthropic-us-east", **spec)
    with pytest.raises(exc) as info:
        await claude.messages.create(model=MODEL_A, max_tokens=50, messages=MESSAGES)
    assert info.value.status_code == status
    if status == 529:
        assert isinstance(info.value, anthropic.OverloadedError)
        assert info.value.body["error"]["type"] == "overloaded_error"
    if status == 429:
        assert info.value.response.headers["retry-after"] == "3"


async def test_anthropic_sdk_stream_error_event_raises(sim, claude):
    """An error event inside a 200 stream surfaces as an SDK APIStatusError."""
    await fault(sim, "anthropic-us-east", kind="stream_error_event", after_tokens=3)
    with pytest.raises(anthropic.APIStatusError) as info:
        async with claude.messages.stream(model=MODEL_A, max_tokens=300, messages=MESSAGES) as s:
            async for _ in s.text_stream:
                pass
    assert "overloaded_error" in str(info.value)


async def test_anthropic_sdk_cut_stream_raises(sim, claude):
    """A stream cut mid-way surfaces as a connection-level SDK error, not a reply."""
    await fault(sim, "anthropic-us-east", kind="stream_cut", after_tokens=4)
    # The SDK lets its transport's RemoteProtocolError escape from a cut stream.
    with pytest.raises(Exception) as info:
        async with claude.messages.stream(model=MODEL_A, max_tokens=300, messages=MESSAGES) as s:
            await s.get_final_message()
    err = info.value
    assert isinstance(err, anthropic.APIConnectionError) or "incomplete chunked read" in str(err)


async def test_openai_sdk_cut_stream_raises_connection_error(sim, gpt):
    """A cut OpenAI stream raises openai.APIConnectionError."""
    await fault(sim, "openai-us", kind="stream_cut", after_tokens=4)
    stream = await gpt.chat.completions.create(model=MODEL_O, messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIConnectionError):
        async for _ in stream:
            pass


async def test_openai_sdk_create_and_models(gpt):
    """chat.completions.create and models.list parse the simulator's responses."""
    r = await gpt.chat.completions.create(model=MODEL_O, messages=MESSAGES)
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content.startswith("[echo: Plan a trip to Lisbon]")
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    models = [m.id async for m in gpt.models.list()]
    assert models == [MODEL_O]


async def test_openai_sdk_stream_with_usage(gpt):
    """Streaming with include_usage yields content deltas, a finish reason and usage."""
    plain = await gpt.chat.completions.create(model=MODEL_O, messages=MESSAGES)
    stream = await gpt.chat.completions.create(
        model=MODEL_O, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    text, finish, usage = [], None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(text) == plain.choices[0].message.content
    assert finish == "stop" and usage == plain.usage


async def test_openai_sdk_json_schema(gpt):
    """response_format json_schema content validates against the schema."""
    r = await gpt.chat.completions.create(
        model=MODEL_O,
        messages=MESSAGES,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "trip", "schema": SCHEMA, "strict": True},
        },
    )
    jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)


@pytest.mark.parametrize(
    ("spec", "exc", "status", "code"),
    [
        ({"kind": "rate_limit"}, openai.RateLimitError, 429, "rate_limit_exceeded"),
        ({"kind": "quota_exhausted"}, openai.RateLimitError, 429, "insufficient_quota"),
        ({"kind": "unavailable"}, openai.InternalServerError, 503, "service_unavailable"),
        ({"kind": "server_error"}, openai.InternalServerError, 500, None),
        ({"kind": "context_length"}, openai.BadRequestError, 400, "context_length_exceeded"),
        ({"kind": "content_filter"}, openai.BadRequestError, 400, "content_policy_violation"),
    ],
)
async def test_openai_sdk_error_types(sim, gpt, spec, exc, status, code):
    """The SDK raises its own exception type and exposes the error code."""
    await fault(sim, "openai-us", **spec)
    with pytest.raises(exc) as info:
        await gpt.chat.completions.create(model=MODEL_O, messages=MESSAGES)
    assert info.value.status_code == status and info.value.code == code


async def test_openai_sdk_stream_error_event_raises(sim, gpt):
    """An error object inside a 200 stream raises openai.APIError."""
    await fault(sim, "openai-us", kind="stream_error_event", after_tokens=2)
    stream = await gpt.chat.completions.create(model=MODEL_O, messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError):
        async for _ in stream:
            pass


async def test_openai_sdk_against_openai_compatible_endpoint(sim):
    """The OpenAI SDK also works against the OpenAI-compatible cheap-mini endpoint."""
    client = openai.AsyncOpenAI(base_url=sim.base_url("cheap-mini"), api_key="k", max_retries=0)
    r = await client.chat.completions.create(model="mistral-small-latest", messages=MESSAGES)
    assert r.model == "mistral-small-latest" and r.choices[0].message.content
