"""The pump's per-chunk bookkeeping: what a chunk of several events still owes every event.

The pump folds a chunk's events in one pass, marks milestones at the chunk's arrival and
reports progress at most once per chunk (only when due); after the terminal event the same
read loop reads the body's end. These tests pin what that must not lose: the size limit
and the malformed limit stop at the event that crossed them (the partial text is exactly
what came before and with it), progress still carries the partial text as it grows, a
finished stream's body is read to its end (the connection goes back to the pool) and a
server holding the stream open after the terminal event does not hold the call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from agent_failover.providers import base
from agent_failover.providers.client import Budgets, build_http_client
from agent_failover.providers.pump import STREAM_DRAIN_S
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, Message
from tests.providers.wire import endpoint, hang_forever, openai_stream, sse

Q = ChatRequest(messages=[Message(role="user", content="q")])


def _client(body: AsyncIterator[bytes]) -> httpx.AsyncClient:
    return build_http_client(
        transport=httpx.MockTransport(
            lambda _: httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body
            )
        )
    )


async def _chunks(*chunks: bytes, hang: bool = False) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
    if hang:
        await hang_forever()


async def test_the_size_limit_stops_at_the_event_that_crossed_it_inside_a_chunk():
    """Five 4-byte deltas in one chunk under a 10-byte limit: the third crosses it, and the
    partial text ends there, not at the chunk's end."""
    events = openai_stream(["aaaa", "bbbb", "cccc", "dddd", "eeee"])
    budgets = Budgets(total_s=5, max_reply_bytes=10)
    async with _client(_chunks(b"".join(events))) as client:
        with pytest.raises(E.OversizedOutputError) as info:
            await complete(client, endpoint("openai-us"), Q, budgets)
    assert info.value.partial_text == "aaaabbbbcccc"


async def test_too_many_malformed_events_stop_at_the_one_that_made_them_too_many():
    """Malformed events among content in one chunk: the stream fails at the fourth
    malformed event, with the text folded before it, not the text after it."""
    bad = sse(None, "{not json")
    head, *tokens = openai_stream(["a", "b", "c", "d", "e"], terminal=False)
    chunk = head + b"".join(t + bad for t in tokens)
    async with _client(_chunks(chunk)) as client:
        with pytest.raises(E.MalformedStreamError) as info:
            await complete(client, endpoint("openai-us"), Q, Budgets(total_s=5))
    assert info.value.partial_text == "abcd"


async def test_progress_is_reported_once_per_chunk_with_the_whole_chunks_text():
    """Three tokens arriving in one chunk make one report carrying all three (each event's
    own report was a call per token, the last two throttled away at once); the final
    report carries the whole reply."""
    seen: list[str] = []
    head, *tokens = openai_stream(["Hello ", "big ", "world"])
    async with _client(_chunks(head, b"".join(tokens))) as client:
        reply = await complete(
            client,
            endpoint("openai-us"),
            Q,
            Budgets(total_s=5),
            on_progress=lambda text, tokens: seen.append(text),
        )
    assert seen == ["Hello big world", reply.text]


async def test_progress_due_on_every_chunk_carries_the_growing_partial_text(monkeypatch):
    """With no interval between reports, every chunk that brings text reports the partial
    text so far (a heartbeat's source), and one without text (the finish) reports none."""
    monkeypatch.setattr(base, "PROGRESS_INTERVAL_S", 0.0)
    seen: list[tuple[str, int]] = []
    async with _client(_chunks(*openai_stream(["ab", "cd", "ef"]))) as client:
        await complete(
            client,
            endpoint("openai-us"),
            Q,
            Budgets(total_s=5),
            on_progress=lambda text, tokens: seen.append((text, tokens)),
        )
    assert [text for text, _ in seen] == ["ab", "abcd", "abcdef", "abcdef"]
    assert all(tokens >= 1 for _, tokens in seen)


async def test_a_finished_stream_is_read_to_its_end():
    """After the terminal event the body's end is read (so httpx hands the connection back
    to its pool instead of closing it): the body runs to its last line."""
    ended = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        for chunk in openai_stream(["hi"]):
            yield chunk
        yield b": trailer comment\n\n"
        ended.set()

    async with _client(body()) as client:
        reply = await complete(client, endpoint("openai-us"), Q, Budgets(total_s=5))
    assert reply.text == "hi"
    assert ended.is_set()


async def test_a_stream_held_open_after_its_terminal_event_does_not_hold_the_call():
    """A server that keeps the connection open after ``[DONE]``: the call returns its
    answer after the short drain, not at the idle or total budget, and leaves no timer
    that could cancel its task later."""
    loop = asyncio.get_running_loop()
    budgets = Budgets(ttft_s=5, idle_s=5, total_s=10)
    started = loop.time()
    async with _client(_chunks(*openai_stream(["hi"]), hang=True)) as client:
        reply = await complete(client, endpoint("openai-us"), Q, budgets)
        waited = loop.time() - started
        await asyncio.sleep(STREAM_DRAIN_S * 2)  # a stray timer would cancel this sleep
    assert reply.text == "hi"
    assert waited < budgets.idle_s / 2
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
