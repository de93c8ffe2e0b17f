"""The streaming pump's one timer per stream: every budget still holds, exactly as before.

The pump no longer arms a timeout around every read; one timer stays armed and, when it
fires before the deadline as it then stands (chunks arrived since), moves to it. These
tests pin what that must not change: the idle budget counts from the *last* chunk, not
the first; a stall still fails with the same typed error; a cancellation from outside
stays a cancellation; and the timer is gone once the call returns.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator

import httpx
import pytest

from agent_failover.providers.client import Budgets, build_http_client
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, Message
from tests.providers.wire import endpoint, hang_forever, openai_stream

Q = ChatRequest(messages=[Message(role="user", content="q")])
IDLE_S = 0.08


def _client(body: AsyncIterator[bytes], **headers: str) -> httpx.AsyncClient:
    return build_http_client(
        transport=httpx.MockTransport(
            lambda _: httpx.Response(
                200, headers={"content-type": "text/event-stream", **headers}, content=body
            )
        )
    )


async def _ticking(ticks: int, gap_s: float, *, stall: bool = False) -> AsyncIterator[bytes]:
    """A role chunk, then ``ticks`` token chunks ``gap_s`` apart, then the end (or a stall)."""
    events = openai_stream(["t"] * ticks)
    yield events[0]
    for event in events[1 : 1 + ticks]:
        await asyncio.sleep(gap_s)
        yield event
    if stall:
        await hang_forever()
    for event in events[1 + ticks :]:
        yield event


async def test_idle_budget_counts_from_the_last_chunk():
    """Tokens every quarter of the idle budget for three idle budgets: no timeout, because
    each gap is within budget (a timer left at its first deadline would fire here)."""
    ticks = 12
    budgets = Budgets(ttft_s=5, idle_s=IDLE_S, total_s=10)
    async with _client(_ticking(ticks, IDLE_S / 4)) as client:
        reply = await complete(client, endpoint("openai-us"), Q, budgets)
    assert reply.text == "t" * ticks


async def test_a_stall_after_tokens_fails_at_the_idle_budget():
    """Tokens, then silence: StreamStalledError with the partial text, no earlier than the
    idle budget after the last token."""
    loop = asyncio.get_running_loop()
    budgets = Budgets(ttft_s=5, idle_s=IDLE_S, total_s=10)
    started = loop.time()
    async with _client(_ticking(6, IDLE_S / 4, stall=True)) as client:
        with pytest.raises(E.StreamStalledError, match="idle budget") as info:
            await complete(client, endpoint("openai-us"), Q, budgets)
    assert loop.time() - started >= 6 * IDLE_S / 4 + IDLE_S
    assert info.value.partial_text == "t" * 6


async def test_outside_cancellation_stays_a_cancellation_and_no_timer_outlives_the_call():
    """A hedge cancelling the attempt mid-stream gets CancelledError, not a typed timeout;
    a call that returned leaves no timer behind to cancel its task later."""
    budgets = Budgets(ttft_s=5, idle_s=IDLE_S, total_s=10, trailer_grace_s=0.01)
    async with _client(_ticking(2, 0.0, stall=True)) as client:
        task = asyncio.create_task(complete(client, endpoint("openai-us"), Q, budgets))
        await asyncio.sleep(IDLE_S / 4)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    async with _client(_ticking(2, 0.0)) as client:
        reply = await complete(client, endpoint("openai-us"), Q, budgets)
        await asyncio.sleep(IDLE_S * 2)  # a stray timer would cancel this sleep
    assert reply.text == "tt"
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_content_encoded_stream_is_decoded():
    """A gzip-encoded event stream (a proxy may compress it) is read decoded, not raw."""
    raw = b"".join(openai_stream(["Hello ", "world"]))
    packed = gzip.compress(raw)

    async def body() -> AsyncIterator[bytes]:
        for i in range(0, len(packed), 7):
            yield packed[i : i + 7]

    async with _client(body(), **{"content-encoding": "gzip"}) as client:
        reply = await complete(client, endpoint("openai-us"), Q, Budgets(total_s=5))
    assert reply.text == "Hello world"
