"""The shared client and the budgets: limits, no retries, slots, deadlines, progress, cancel."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from pydantic import ValidationError

from agent_failover.providers.client import Budgets, FailoverHTTPClient, build_http_client
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.models import ChatRequest, Message
from tests.providers.wire import (
    SENTINEL_KEY,
    anthropic_stream,
    endpoint,
    hang_forever,
    openai_json,
    openai_stream,
    stream_response,
)

Q = ChatRequest(messages=[Message(role="user", content="q")])


def test_budgets_validate_on_construction():
    """Zero or negative budgets are rejected when built."""
    with pytest.raises(ValidationError):
        Budgets(ttft_s=0)
    with pytest.raises(ValidationError):
        Budgets(total_s=-1)


def test_budgets_httpx_timeout():
    """The httpx timeout is a backstop built from the budgets."""
    t = Budgets(connect_s=1, total_s=9).httpx_timeout()
    assert (t.connect, t.read, t.pool) == (1, 9, 1)


async def test_build_http_client_pools_per_origin_without_retries():
    """Each origin gets its own pool, sized from its endpoints, with retries=0."""
    eps = [
        endpoint("openai-us", max_connections=7),
        endpoint("cheap-mini", max_connections=3),
        endpoint("gemini-flash", base_url="http://127.0.0.2:9000/gemini-flash", max_connections=4),
    ]
    client = build_http_client(eps)
    async with client:
        assert isinstance(client, FailoverHTTPClient)
        pools = {
            str(pattern.pattern): transport._pool  # type: ignore[union-attr]
            for pattern, transport in client._mounts.items()
            if transport is not None
        }
        assert pools["http://127.0.0.1:8400"]._max_connections == 10
        assert pools["http://127.0.0.2:9000"]._max_connections == 4
        assert all(p._retries == 0 for p in pools.values())
        default = client._transport._pool  # type: ignore[attr-defined]
        assert default._max_connections == 14 and default._retries == 0
        assert client.follow_redirects is False


def _held_client() -> tuple[FailoverHTTPClient, asyncio.Event, asyncio.Event]:
    """A client whose every request is answered (200, "ok") only once ``release`` is set;
    ``started`` is set when a request reaches the transport."""
    release = asyncio.Event()
    started = asyncio.Event()

    async def respond(_: httpx.Request) -> httpx.Response:
        started.set()
        await release.wait()
        return httpx.Response(200, json=openai_json("ok"))

    return build_http_client(transport=httpx.MockTransport(respond)), started, release


async def test_endpoint_slots_bound_concurrency():
    """With max_connections=1 a second concurrent call waits, then fails as our own
    saturation (local_saturation, not counted against the route), not as no_response."""
    ep = endpoint("openai-us", max_connections=1)
    client, started, release = _held_client()
    budgets = Budgets(connect_s=0.03, total_s=5)
    req = Q.model_copy(update={"stream": False})
    async with client:
        first = asyncio.create_task(complete(client, ep, req, budgets))
        await started.wait()
        assert client.endpoint_slots.in_use(ep) == 1
        with pytest.raises(E.LocalSaturationError, match="slots busy") as info:
            await complete(client, ep, req, budgets)
        assert info.value.error_class is E.ErrorClass.LOCAL_SATURATION
        assert info.value.classification.counts_against_route is False
        release.set()
        assert (await first).text == "ok"
        assert client.endpoint_slots.in_use(ep) == 0


async def test_endpoint_slots_are_per_bulkhead():
    """A bulkhead whose slots to an endpoint are all taken does not take another
    bulkhead's: the other's call to the same endpoint goes through."""
    ep = endpoint("openai-us", max_connections=1)
    client, started, release = _held_client()
    req = Q.model_copy(update={"stream": False})
    busy = Budgets(connect_s=0.03, total_s=5, bulkhead="specialists")
    other = Budgets(connect_s=0.03, total_s=5, bulkhead="planner")
    async with client:
        first = asyncio.create_task(complete(client, ep, req, busy))
        await started.wait()
        with pytest.raises(E.LocalSaturationError, match="specialists") as info:
            await complete(client, ep, req, busy)
        assert info.value.bulkhead == "specialists"
        second = asyncio.create_task(complete(client, ep, req, other))
        for _ in range(50):
            if client.endpoint_slots.in_use(ep, "planner"):
                break
            await asyncio.sleep(0)
        assert client.endpoint_slots.in_use(ep) == 2
        release.set()
        assert (await first).text == (await second).text == "ok"


async def test_origin_pools_hold_every_bulkheads_slots():
    """With two bulkheads sharing the client, each origin's pool holds both bulkheads'
    slots, so httpx's pool is never the tighter limit."""
    eps = [
        endpoint("openai-us", max_connections=7),
        endpoint("gemini-flash", base_url="http://127.0.0.2:9000/gemini-flash", max_connections=4),
    ]
    client = build_http_client(eps, bulkheads=2)
    async with client:
        pools = {
            str(pattern.pattern): transport._pool  # type: ignore[union-attr]
            for pattern, transport in client._mounts.items()
            if transport is not None
        }
        assert pools["http://127.0.0.1:8400"]._max_connections == 7 * 2
        assert pools["http://127.0.0.2:9000"]._max_connections == 4 * 2
    with pytest.raises(ValueError, match="bulkheads"):
        build_http_client(eps, bulkheads=0)


async def test_total_budget_while_tokens_trickle():
    """Tokens arriving within idle but past the total budget fail as StreamStalledError."""

    async def body():
        yield openai_stream(["a"])[0]
        while True:
            yield openai_stream(["tick "])[1]
            await asyncio.sleep(0.005)

    client = build_http_client(
        transport=httpx.MockTransport(
            lambda _: httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body()
            )
        )
    )
    budgets = Budgets(ttft_s=1, idle_s=1, total_s=0.06)
    async with client:
        with pytest.raises(E.StreamStalledError, match="total") as info:
            await complete(client, endpoint("openai-us"), Q, budgets)
    assert info.value.partial_text.startswith("tick")


async def test_ttft_counts_content_not_pings():
    """Events without content (message_start, pings) do not satisfy the first-token budget."""
    prelude = anthropic_stream(["x"])[:3]  # message_start, content_block_start, ping
    client = build_http_client(
        transport=httpx.MockTransport(lambda _: stream_response(prelude * 1, hang=True))
    )
    async with client:
        with pytest.raises(E.SlowFirstTokenError):
            await complete(
                client, endpoint("anthropic-us-east"), Q, Budgets(ttft_s=0.03, total_s=5)
            )


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_on_progress_reports_text(is_async):
    """on_progress (sync or async) sees the first token and, finally, the whole text."""
    seen: list[tuple[str, int]] = []

    def sync_cb(text: str, tokens: int) -> None:
        seen.append((text, tokens))

    async def async_cb(text: str, tokens: int) -> None:
        seen.append((text, tokens))

    client = build_http_client(
        transport=httpx.MockTransport(
            lambda _: stream_response(openai_stream(["Hello ", "big ", "world"]))
        )
    )
    async with client:
        reply = await complete(
            client,
            endpoint("openai-us"),
            Q,
            Budgets(),
            on_progress=async_cb if is_async else sync_cb,
        )
    assert seen[0][0] == "Hello "
    assert seen[-1] == (reply.text, seen[-1][1]) and seen[-1][1] >= 1


async def test_cancellation_closes_the_stream():
    """Cancelling a call mid-stream propagates CancelledError and closes the response."""
    closed = asyncio.Event()

    async def body():
        try:
            yield openai_stream(["Hi"])[1]
            await hang_forever()
        finally:
            closed.set()

    client = build_http_client(
        transport=httpx.MockTransport(
            lambda _: httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body()
            )
        )
    )
    async with client:
        task = asyncio.create_task(complete(client, endpoint("openai-us"), Q, Budgets()))
        await asyncio.sleep(0)  # let the call start; no timing depends on this
        for _ in range(50):
            if client.endpoint_slots.in_use(endpoint("openai-us")):
                break
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(closed.wait(), 1)
        assert client.endpoint_slots.in_use(endpoint("openai-us")) == 0


@pytest.mark.parametrize("name", ["anthropic-us-east", "openai-us", "gemini-flash"])
async def test_key_absent_from_reply(name):
    """A successful reply carries no trace of the key."""
    from tests.providers import wire as W

    w = {"anthropic-us-east": W.ANTHROPIC, "openai-us": W.OPENAI, "gemini-flash": W.GEMINI}[name]
    client = build_http_client(
        transport=httpx.MockTransport(lambda _: stream_response(w.ok_stream(["ok"])))
    )
    async with client:
        reply = await complete(client, endpoint(name), Q, Budgets())
    assert SENTINEL_KEY not in reply.model_dump_json()
    assert SENTINEL_KEY not in repr(endpoint(name))


async def test_a_policys_client_sizes_its_pools_for_every_bulkhead():
    """The worker's client gives each origin room for every bulkhead of the policy's roles."""
    from agent_failover.config import DEFAULT_POLICY_PATH
    from agent_failover.config.loader import load_policy
    from agent_failover.providers.client import policy_http_client

    policy = load_policy(DEFAULT_POLICY_PATH, env={})
    bulkheads = {role.bulkhead for role in policy.roles.values()}
    assert len(bulkheads) > 1
    client = policy_http_client(policy)
    async with client:
        default = client._transport._pool  # type: ignore[attr-defined]
        expected = sum(e.max_connections for e in policy.endpoints.values()) * len(bulkheads)
        assert default._max_connections == expected
