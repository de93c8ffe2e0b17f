"""Wire-format fixtures for the adapter tests: endpoints, reply bodies and SSE streams.

One :class:`Wire` per provider builds the same scenarios in that provider's format, so
the error-path tests run once per adapter from a single parametrized table.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from agent_failover.resilience.endpoint import EndpointConfig, Prices
from agent_failover.testing.sim.wire import eventstream as es

SENTINEL_KEY = "sk-SENTINEL-do-not-leak-0123456789abcdef"
KEY_ENV = "AGENT_FAILOVER_TEST_KEY"
BASE = "http://127.0.0.1:8400"


def sse(event: str | None, data: Any) -> bytes:
    """One SSE block; ``data`` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


#: Cloud routes: the fields beyond the vendor-API table (auth carries the sentinel key too:
#: a Bedrock API key, an Azure api-key, a Vertex express-mode key header).
CLOUD_FIELDS: dict[str, dict[str, Any]] = {
    "azure-swedencentral": {"cloud": "azure", "deployment": "gpt-41-prod"},
    "bedrock-us-west-2": {"cloud": "aws"},
    "vertex-europe-west1": {
        "cloud": "gcp",
        "project": "sim-project",
        "auth": "none",
        "api_key_env": None,
        "headers_from_env": {"x-goog-api-key": KEY_ENV},
    },
    "vertex-gemini": {
        "cloud": "gcp",
        "project": "sim-project",
        "auth": "none",
        "api_key_env": None,
        "headers_from_env": {"x-goog-api-key": KEY_ENV},
    },
}


def endpoint(name: str, /, **extra: Any) -> EndpointConfig:
    """The simulator endpoint ``name`` with test prices and the sentinel key's env var."""
    table = {
        "anthropic-us-east": (
            "anthropic",
            "anthropic",
            "us-east",
            "claude-sonnet-4-5",
            200_000,
            "",
        ),
        "openai-us": ("openai", "openai", "us", "gpt-4.1", 128_000, "/v1"),
        "cheap-mini": ("openai", "mistral", "eu", "mistral-small-latest", 32_000, "/v1"),
        "gemini-flash": ("gemini", "google", "us", "gemini-2.5-flash", 1_000_000, ""),
        "azure-swedencentral": ("openai", "microsoft", "swedencentral", "gpt-4.1", 128_000, ""),
        "bedrock-us-west-2": (
            "bedrock",
            "aws",
            "us-west-2",
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            200_000,
            "",
        ),
        "vertex-europe-west1": (
            "anthropic",
            "google",
            "europe-west1",
            "claude-sonnet-4-5@20250929",
            200_000,
            "",
        ),
        "vertex-gemini": ("gemini", "google", "europe-west1", "gemini-2.5-flash", 1_000_000, ""),
    }
    provider, org, region, model, window, suffix = table[name]
    fields: dict[str, Any] = {
        "name": name,
        "provider": provider,
        "provider_name": org,
        "region": region,
        "base_url": f"{BASE}/{name}{suffix}",
        "model": model,
        "context_window": window,
        "api_key_env": KEY_ENV,
        "prices": Prices(input_per_mtok=3.0, output_per_mtok=15.0),
    }
    fields.update(CLOUD_FIELDS.get(name, {}))
    fields.update(extra)
    return EndpointConfig(**fields)


async def hang_forever() -> None:
    """Await an event nobody sets: the server never sends the next byte."""
    await asyncio.Event().wait()


def stream_response(chunks: Iterable[bytes], *, hang: bool = False) -> httpx.Response:
    """A 200 ``text/event-stream`` response yielding ``chunks``, then EOF (or a hang)."""
    items = list(chunks)

    async def body() -> AsyncIterator[bytes]:
        for chunk in items:
            yield chunk
        if hang:
            await hang_forever()

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


@dataclass
class Wire:
    """Builders for one provider's bodies and streams."""

    def cut(self, chunks: list[bytes]) -> list[bytes]:
        """``chunks`` without the terminal event (and whatever follows it)."""
        return chunks[: -self.terminal_blocks]

    name: str
    ok_json: Callable[[str], dict[str, Any]]
    ok_stream: Callable[[list[str]], list[bytes]]  # last element is the terminal part
    terminal_blocks: int  # how many final blocks to drop so the terminal event is missing
    error_event: Callable[[str], bytes]
    filtered_json: Callable[[], dict[str, Any]]
    filtered_stream: Callable[[list[str]], list[bytes]]
    context_body: dict[str, Any]
    garbage: bytes = b"data: {not json\n\n"


# -- Anthropic ---------------------------------------------------------------------------


def anthropic_json(text: str, *, stop: str = "end_turn", blocks: list[Any] | None = None) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": blocks if blocks is not None else [{"type": "text", "text": text}],
        "stop_reason": stop,
        "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 5},
    }


def anthropic_stream(
    parts: list[str], *, stop: str = "end_turn", terminal: bool = True
) -> list[bytes]:
    out = [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [],
                    "usage": {"input_tokens": 100, "output_tokens": 1},
                },
            },
        ),
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        sse("ping", {"type": "ping"}),
    ]
    for p in parts:
        out.append(
            sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": p},
                },
            )
        )
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop},
                "usage": {"output_tokens": 20},
            },
        )
    )
    if terminal:
        out.append(sse("message_stop", {"type": "message_stop"}))
    return out


ANTHROPIC = Wire(
    name="anthropic-us-east",
    ok_json=anthropic_json,
    ok_stream=anthropic_stream,
    terminal_blocks=2,  # message_delta (stop_reason), message_stop
    error_event=lambda kind: sse(
        "error", {"type": "error", "error": {"type": kind, "message": "x"}}
    ),
    filtered_json=lambda: anthropic_json("", stop="refusal"),
    filtered_stream=lambda parts: anthropic_stream(parts, stop="refusal"),
    context_body={
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    },
)


# -- OpenAI ------------------------------------------------------------------------------


def openai_json(text: str, *, finish: str = "stop", tool_calls: list[Any] | None = None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1-2025-04-14",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-4.1-2025-04-14",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def openai_stream(
    parts: list[str],
    *,
    finish: str = "stop",
    usage: bool = True,
    done: bool = True,
    terminal: bool = True,
) -> list[bytes]:
    out = [sse(None, _chunk({"role": "assistant", "content": ""}))]
    out += [sse(None, _chunk({"content": p})) for p in parts]
    if terminal:
        out.append(sse(None, _chunk({}, finish)))
        if usage:
            out.append(
                sse(
                    None,
                    {
                        "id": "chatcmpl-1",
                        "object": "chat.completion.chunk",
                        "model": "gpt-4.1-2025-04-14",
                        "choices": [],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20},
                    },
                )
            )
        if done:
            out.append(b"data: [DONE]\n\n")
    return out


OPENAI = Wire(
    name="openai-us",
    ok_json=openai_json,
    ok_stream=openai_stream,
    terminal_blocks=3,  # finish_reason chunk, usage chunk, [DONE]
    error_event=lambda kind: sse(None, {"error": {"type": kind, "message": "x", "code": None}}),
    filtered_json=lambda: openai_json("partial", finish="content_filter"),
    filtered_stream=lambda parts: openai_stream(parts, finish="content_filter"),
    context_body={
        "error": {
            "message": "This model's maximum context length is 128000 tokens",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
)


# -- Gemini ------------------------------------------------------------------------------


def gemini_json(text: str, *, finish: str = "STOP", parts: list[Any] | None = None) -> dict:
    return {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": parts if parts is not None else [{"text": text}],
                },
                "finishReason": finish,
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 100,
            "candidatesTokenCount": 15,
            "thoughtsTokenCount": 5,
            "totalTokenCount": 120,
        },
        "modelVersion": "gemini-2.5-flash-001",
    }


def gemini_stream(parts: list[str], *, finish: str = "STOP", terminal: bool = True) -> list[bytes]:
    out = []
    for i, p in enumerate(parts):
        last = terminal and i == len(parts) - 1
        chunk: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}],
            "modelVersion": "gemini-2.5-flash-001",
        }
        if last:
            chunk["candidates"][0]["finishReason"] = finish
            chunk["usageMetadata"] = {
                "promptTokenCount": 100,
                "candidatesTokenCount": 15,
                "thoughtsTokenCount": 5,
            }
        out.append(sse(None, chunk))
    return out


GEMINI = Wire(
    name="gemini-flash",
    ok_json=gemini_json,
    ok_stream=gemini_stream,
    terminal_blocks=1,  # the chunk carrying finishReason
    error_event=lambda kind: sse(None, {"error": {"code": 503, "message": "x", "status": kind}}),
    filtered_json=lambda: gemini_json("", finish="SAFETY"),
    filtered_stream=lambda parts: gemini_stream(parts, finish="SAFETY"),
    context_body={
        "error": {
            "code": 400,
            "status": "INVALID_ARGUMENT",
            "message": "The input token count (1200000) exceeds the maximum "
            "number of tokens allowed (1048576).",
        }
    },
)

# -- Bedrock Converse (AWS event-stream frames) --------------------------------------------


def bedrock_json(text: str, *, stop: str = "end_turn", blocks: list[Any] | None = None) -> dict:
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": blocks if blocks is not None else [{"text": text}],
            }
        },
        "stopReason": stop,
        "usage": {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120},
        "metrics": {"latencyMs": 12},
    }


def bedrock_stream(parts: list[str], *, stop: str = "end_turn") -> list[bytes]:
    out = [es.event("messageStart", {"role": "assistant"})]
    out += [
        es.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}, "p": "x"})
        for p in parts
    ]
    out.append(es.event("contentBlockStop", {"contentBlockIndex": 0}))
    out.append(es.event("messageStop", {"stopReason": stop}))
    usage = {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120}
    out.append(es.event("metadata", {"usage": usage, "metrics": {"latencyMs": 12}}))
    return out


BEDROCK = Wire(
    name="bedrock-us-west-2",
    ok_json=bedrock_json,
    ok_stream=bedrock_stream,
    terminal_blocks=2,  # messageStop (stopReason), metadata
    error_event=lambda kind: es.exception(kind, "x"),
    filtered_json=lambda: bedrock_json("", stop="content_filtered", blocks=[]),
    filtered_stream=lambda parts: bedrock_stream(parts, stop="guardrail_intervened"),
    context_body={"message": "Input is too long for requested model."},
    garbage=es.event("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"te'),
)

# -- the same payloads on the clouds ------------------------------------------------------

AZURE = dataclasses.replace(OPENAI, name="azure-swedencentral")
VERTEX_CLAUDE = dataclasses.replace(ANTHROPIC, name="vertex-europe-west1")
VERTEX_GEMINI = dataclasses.replace(GEMINI, name="vertex-gemini")

WIRES = [ANTHROPIC, OPENAI, GEMINI, BEDROCK, AZURE, VERTEX_CLAUDE, VERTEX_GEMINI]
#: Each wire's overload error kind for an in-stream error event.
OVERLOAD_KIND = {
    "anthropic-us-east": "overloaded_error",
    "openai-us": "server_overloaded",
    "gemini-flash": "UNAVAILABLE",
    "bedrock-us-west-2": "serviceUnavailableException",
    "azure-swedencentral": "server_overloaded",
    "vertex-europe-west1": "overloaded_error",
    "vertex-gemini": "UNAVAILABLE",
}
