"""Replies above the role's ``max_reply_bytes`` fail as ``oversized_output`` at the boundary,
for every adapter, streamed or not; an endless stream is abandoned as soon as it passes the
limit instead of being read to its (missing) end."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from agent_failover.providers.client import Budgets
from agent_failover.providers.registry import complete
from agent_failover.providers.validate import reply_bytes, validate_reply
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatReply, FinishReason, ToolCall
from tests.providers.test_pipeline_errors import WIRE_IDS, assert_no_key, request
from tests.providers.wire import WIRES, Wire, endpoint, stream_response

LIMIT = 8 * 1024
BUDGETS = Budgets(
    connect_s=0.5, ttft_s=0.5, idle_s=0.5, total_s=5.0, trailer_grace_s=0.05, max_reply_bytes=LIMIT
)


def _reply(text: str, tool_calls: list[ToolCall] | None = None) -> ChatReply:
    return ChatReply(
        text=text,
        endpoint="openai-us",
        model="m",
        finish_reason=FinishReason.STOP,
        tool_calls=tool_calls or [],
    )


def test_oversized_is_a_semantic_failover_that_is_never_retried_on_the_route() -> None:
    """The class is classified once: FAILOVER, semantic, not retryable on the same route."""
    cls = E.CLASSIFICATION[E.ErrorClass.OVERSIZED_OUTPUT]
    assert cls.decision is E.Decision.FAILOVER and cls.semantic and not cls.retryable
    assert cls.counts_against_route
    assert E.ERROR_TYPES[E.ErrorClass.OVERSIZED_OUTPUT] is E.OversizedOutputError


def test_validate_counts_text_and_tool_arguments_in_utf8_bytes() -> None:
    """Multi-byte text and tool-call arguments count; at the limit passes, above fails."""
    assert reply_bytes(_reply("é" * 10)) == 20
    validate_reply(_reply("x" * LIMIT), None, endpoint="openai-us", max_reply_bytes=LIMIT)
    with pytest.raises(E.OversizedOutputError) as info:
        validate_reply(_reply("é" * LIMIT), None, endpoint="openai-us", max_reply_bytes=LIMIT)
    assert str(LIMIT) in str(info.value) and info.value.status == 200
    call = ToolCall(id="c1", name="f", arguments={"blob": "y" * LIMIT})
    with pytest.raises(E.OversizedOutputError):
        validate_reply(_reply("", [call]), None, endpoint="openai-us", max_reply_bytes=LIMIT)


def test_oversized_is_checked_before_the_schema() -> None:
    """A huge reply is oversized, not 'invalid JSON': the size is what must not travel."""
    with pytest.raises(E.OversizedOutputError):
        validate_reply(
            _reply("{" * (LIMIT + 1)), {"type": "object"}, endpoint="x", max_reply_bytes=LIMIT
        )


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_streamed_reply_above_the_limit_fails_oversized(mock_client, wire: Wire) -> None:
    """A stream that passes the limit fails with oversized_output (partial text kept)."""
    parts = ["z" * 1024] * 20
    client, _ = mock_client(lambda r: stream_response(wire.ok_stream(parts)))
    async with client:
        with pytest.raises(E.OversizedOutputError) as info:
            await complete(client, endpoint(wire.name), request(True), BUDGETS)
    err = info.value
    assert LIMIT < len(err.partial_text) <= LIMIT + 1024
    assert_no_key(err)


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_json_reply_above_the_limit_fails_oversized(mock_client, wire: Wire) -> None:
    """A non-streamed reply above the limit fails; a body far above it is not even read
    to the end (the read stops at twice the limit plus the envelope)."""
    for size in (2 * LIMIT, 200 * LIMIT):
        body = json.dumps(wire.ok_json("q" * size))
        client, _ = mock_client(lambda r, body=body: httpx.Response(200, json=json.loads(body)))
        async with client:
            with pytest.raises(E.OversizedOutputError) as info:
                await complete(client, endpoint(wire.name), request(False), BUDGETS)
        assert len(info.value.partial_text) <= 2 * LIMIT


async def test_endless_stream_is_abandoned_at_the_limit(mock_client) -> None:
    """A stream that never ends is cut off once it passes the limit: the attempt fails at
    once with a bounded partial text instead of running to the total budget."""
    wire = WIRES[0]
    head = wire.ok_stream(["a"])[:3]  # preamble events, no terminal
    sent = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        for chunk in head:
            yield chunk
        piece = wire.ok_stream(["b" * 512])[3]
        while True:
            sent += 1
            yield piece

    def respond(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=endless())

    client, _ = mock_client(respond)
    async with client:
        with pytest.raises(E.OversizedOutputError) as info:
            await complete(client, endpoint(wire.name), request(True), BUDGETS)
    assert sent <= LIMIT // 512 + 2
    assert len(info.value.partial_text) <= LIMIT + 512


async def test_no_limit_keeps_old_behaviour(mock_client) -> None:
    """Budgets without max_reply_bytes (callers that bound it themselves) accept any size."""
    wire = WIRES[0]
    client, _ = mock_client(lambda r: stream_response(wire.ok_stream(["w" * 4096] * 8)))
    async with client:
        reply = await complete(
            client,
            endpoint(wire.name),
            request(True),
            BUDGETS.model_copy(update={"max_reply_bytes": None}),
        )
    assert len(reply.text) == 8 * 4096
