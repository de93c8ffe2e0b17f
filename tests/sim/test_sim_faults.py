"""Every injectable fault, observed from a client on a real socket, plus the attempts log."""

from __future__ import annotations

import asyncio
import json

import httpx
import jsonschema
import pytest

from agent_failover.testing.sim.content import END_MARKER
from agent_failover.testing.sim.faults import Fault, FaultKind
from tests.sim.simtest_helpers import (
    anthropic_body,
    anthropic_url,
    gemini_body,
    gemini_url,
    json_events,
    openai_body,
    openai_url,
    parse_sse,
)

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["answer", "n"],
}


async def set_faults(sim, endpoint: str, *faults: dict) -> None:
    async with sim.admin() as admin:
        await admin.set_faults(endpoint, list(faults))


async def last_attempt(sim):
    async with sim.admin() as admin:
        return (await admin.attempts())[-1]


# --- HTTP status faults ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "status", "etype"),
    [
        ({"kind": "overloaded"}, 529, "overloaded_error"),
        ({"kind": "rate_limit", "retry_after": 7}, 429, "rate_limit_error"),
        ({"kind": "server_error"}, 500, "api_error"),
        ({"kind": "unavailable"}, 503, "api_error"),
        ({"kind": "auth_error"}, 401, "authentication_error"),
        ({"kind": "http_error", "status": 529}, 529, "overloaded_error"),
        ({"kind": "content_filter"}, 400, "invalid_request_error"),
    ],
)
async def test_anthropic_error_statuses(sim, http, fault, status, etype):
    """Status faults answer with Anthropic's status and error type."""
    await set_faults(sim, "anthropic-us-east", fault)
    r = await http.post(anthropic_url(sim), json=anthropic_body())
    assert r.status_code == status
    assert r.json() == {
        "type": "error",
        "error": {"type": etype, "message": r.json()["error"]["message"]},
    }
    attempt = await last_attempt(sim)
    assert attempt.outcome == "error" and attempt.status == status and attempt.faults


async def test_retry_after_header_present_only_when_set(sim, http):
    """A 429 carries Retry-After when the fault sets it and none otherwise."""
    await set_faults(sim, "openai-us", {"kind": "rate_limit", "retry_after": 2.5})
    r = await http.post(openai_url(sim), json=openai_body())
    assert r.status_code == 429 and r.headers["retry-after"] == "3"
    assert r.headers["retry-after-ms"] == "2500"
    assert r.json()["error"]["code"] == "rate_limit_exceeded"
    await set_faults(sim, "openai-us", {"kind": "rate_limit"})
    r = await http.post(openai_url(sim), json=openai_body())
    assert r.status_code == 429 and "retry-after" not in r.headers


@pytest.mark.parametrize(
    ("fault", "status", "code", "etype"),
    [
        ({"kind": "rate_limit"}, 429, "rate_limit_exceeded", "requests"),
        ({"kind": "quota_exhausted"}, 429, "insufficient_quota", "insufficient_quota"),
        ({"kind": "server_error"}, 500, None, "server_error"),
        ({"kind": "unavailable"}, 503, "service_unavailable", "server_error"),
        ({"kind": "overloaded"}, 503, "overloaded", "server_error"),
        ({"kind": "context_length"}, 400, "context_length_exceeded", "invalid_request_error"),
        ({"kind": "content_filter"}, 400, "content_policy_violation", "invalid_request_error"),
        ({"kind": "http_error", "status": 502}, 502, None, "server_error"),
    ],
)
async def test_openai_error_codes(sim, http, fault, status, code, etype):
    """Status faults answer with OpenAI's status, type and code."""
    await set_faults(sim, "openai-us", fault)
    r = await http.post(openai_url(sim), json=openai_body())
    assert r.status_code == status
    err = r.json()["error"]
    assert set(err) == {"message", "type", "code", "param"}
    assert err["code"] == code and err["type"] == etype


@pytest.mark.parametrize(
    ("fault", "status", "name"),
    [
        ({"kind": "rate_limit", "retry_after": 30}, 429, "RESOURCE_EXHAUSTED"),
        ({"kind": "overloaded"}, 503, "UNAVAILABLE"),
        ({"kind": "server_error"}, 500, "INTERNAL"),
        ({"kind": "context_length"}, 400, "INVALID_ARGUMENT"),
    ],
)
async def test_gemini_error_statuses(sim, http, fault, status, name):
    """Status faults answer with Gemini's {code, message, status} body."""
    await set_faults(sim, "gemini-flash", fault)
    r = await http.post(gemini_url(sim), json=gemini_body())
    err = r.json()["error"]
    assert r.status_code == status and err["code"] == status and err["status"] == name
    if "retry_after" in fault:
        assert err["details"][0]["retryDelay"] == "30s"


async def test_context_window_exceeded_automatically(sim, http):
    """A prompt over the endpoint's window is a 400 context error without any fault."""
    long_prompt = "word " * 26_000  # ~32.5k tokens > cheap-mini's 32k window
    body = {"model": "mistral-small-latest", "messages": [{"role": "user", "content": long_prompt}]}
    r = await http.post(openai_url(sim, "cheap-mini"), json=body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "context_length_exceeded" and "32000" in err["message"]
    ok = await http.post(openai_url(sim), json={**body, "model": "gpt-4.1"})
    assert ok.status_code == 200
    r = await http.post(anthropic_url(sim), json=anthropic_body("x " * 420_000))
    assert r.status_code == 400 and "prompt is too long" in r.json()["error"]["message"]
    assert (await last_attempt(sim)).faults == ["context_length_auto"]


# --- connection-level faults --------------------------------------------------------


async def test_connection_reset_before_headers(sim, http):
    """connection_reset drops the TCP connection before any response byte."""
    await set_faults(sim, "anthropic-us-east", {"kind": "connection_reset"})
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        await http.post(anthropic_url(sim), json=anthropic_body())
    await asyncio.wait_for(sim.state.wait_idle(), 2)
    assert (await last_attempt(sim)).outcome == "reset"


async def test_hang_holds_until_client_gives_up_without_leaking(sim):
    """A hung request is released when the client times out; no task is left behind."""
    await set_faults(sim, "openai-us", {"kind": "hang"})
    before = len(asyncio.all_tasks())
    async with httpx.AsyncClient(timeout=httpx.Timeout(0.2)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(openai_url(sim), json=openai_body())
    await asyncio.wait_for(sim.state.wait_idle(), 2)
    attempt = await last_attempt(sim)
    assert attempt.outcome == "client_disconnected" and attempt.faults == ["hang"]
    assert sim.state.inflight == 0
    assert len(asyncio.all_tasks()) <= before


async def test_hang_with_hold_ends_in_reset(sim, http):
    """A hang with 'seconds' gives up by resetting the connection."""
    await set_faults(sim, "openai-us", {"kind": "hang", "seconds": 0.05})
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        await http.post(openai_url(sim), json=openai_body())
    await asyncio.wait_for(sim.state.wait_idle(), 2)
    assert (await last_attempt(sim)).outcome == "reset"


async def test_stop_releases_hung_requests():
    """Stopping the simulator ends held requests instead of waiting for them."""
    from agent_failover.testing.sim.server import start_simulator

    server = await start_simulator()
    server.state.set_faults("openai-us", [Fault(kind=FaultKind.HANG)])
    async with httpx.AsyncClient(timeout=5) as client:
        task = asyncio.ensure_future(client.post(openai_url(server), json=openai_body()))
        await asyncio.wait_for(server.state.wait_busy(), 2)
        await asyncio.wait_for(server.stop(), 3)
        with pytest.raises(httpx.HTTPError):
            await task
    assert server.state.attempts[-1].outcome == "server_shutdown"


async def test_slow_first_token_sends_headers_then_waits(sim):
    """slow_first_token sends the status line, then nothing until the delay passes."""
    await set_faults(sim, "anthropic-us-east", {"kind": "slow_first_token", "seconds": 0.5})
    timeout = httpx.Timeout(5.0, read=0.15)
    async with httpx.AsyncClient(timeout=timeout) as client:
        body = anthropic_body(stream=True)
        async with client.stream("POST", anthropic_url(sim), json=body) as r:
            assert r.status_code == 200
            with pytest.raises(httpx.ReadTimeout):
                await r.aread()


# --- stream faults ------------------------------------------------------------------


async def test_stream_cut_after_n_tokens(sim, http):
    """stream_cut closes the connection after N deltas, without the terminal events."""
    await set_faults(sim, "anthropic-us-east", {"kind": "stream_cut", "after_tokens": 5})
    got: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        async with http.stream("POST", anthropic_url(sim), json=anthropic_body(stream=True)) as r:
            async for chunk in r.aiter_text():
                got.append(chunk)
    events = json_events("".join(got))
    deltas = [e for e, _ in events if e == "content_block_delta"]
    assert len(deltas) == 5 and "message_stop" not in [e for e, _ in events]
    await asyncio.wait_for(sim.state.wait_idle(), 2)
    attempt = await last_attempt(sim)
    assert attempt.outcome == "stream_cut" and attempt.tokens_sent == 5


async def test_non_stream_cut_truncates_body(sim, http):
    """stream_cut on a non-streaming call cuts the JSON body short."""
    await set_faults(sim, "openai-us", {"kind": "stream_cut"})
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        await http.post(openai_url(sim), json=openai_body())


async def test_stream_stall_after_n_tokens(sim):
    """stream_stall stops sending after N tokens for the given seconds."""
    await set_faults(sim, "openai-us", {"kind": "stream_stall", "after_tokens": 3, "seconds": 0.6})
    got: list[str] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.2)) as client:
        with pytest.raises(httpx.ReadTimeout):
            async with client.stream("POST", openai_url(sim), json=openai_body(stream=True)) as r:
                async for chunk in r.aiter_text():
                    got.append(chunk)
    chunks = [json.loads(d) for _, d in parse_sse("".join(got))]
    assert len(chunks) == 1 + 3  # role chunk + three content deltas


async def test_stream_stall_resumes_and_completes(fake_sim, http):
    """After a stall the stream resumes and completes (fake clock: no real wait)."""
    await set_faults(
        fake_sim, "openai-us", {"kind": "stream_stall", "after_tokens": 2, "seconds": 30}
    )
    r = await http.post(openai_url(fake_sim), json=openai_body(stream=True))
    assert parse_sse(r.text)[-1] == (None, "[DONE]")
    assert 30 in fake_sim.state.clock.slept
    assert (await last_attempt(fake_sim)).duration_s >= 30


async def test_malformed_chunk_then_stream_continues(sim, http):
    """malformed_chunk inserts one invalid JSON data line; the rest of the stream is whole."""
    await set_faults(sim, "openai-us", {"kind": "malformed_chunk", "after_tokens": 4})
    r = await http.post(openai_url(sim), json=openai_body(stream=True))
    data = [d for _, d in parse_sse(r.text)]
    bad = []
    for i, d in enumerate(data):
        if d == "[DONE]":
            continue
        try:
            json.loads(d)
        except ValueError:
            bad.append(i)
    assert bad == [5]  # role chunk + 4 deltas precede it
    text = "".join(
        json.loads(d)["choices"][0]["delta"].get("content") or ""
        for i, d in enumerate(data[:-1])
        if i not in bad
    )
    assert text.endswith(END_MARKER) and data[-1] == "[DONE]"


@pytest.mark.parametrize("endpoint", ["anthropic-us-east", "gemini-flash"])
async def test_malformed_chunk_other_formats(sim, http, endpoint):
    """Anthropic and Gemini streams also get a single undecodable data line."""
    await set_faults(sim, endpoint, {"kind": "malformed_chunk", "after_tokens": 1})
    if endpoint == "gemini-flash":
        r = await http.post(gemini_url(sim, stream=True), json=gemini_body())
    else:
        r = await http.post(anthropic_url(sim), json=anthropic_body(stream=True))
    events = parse_sse(r.text)
    assert len(events) - len(json_events(r.text)) == 1


async def test_no_done_keeps_connection_open(sim):
    """no_done sends the finish chunk but not [DONE], and keeps the connection open."""
    await set_faults(sim, "openai-us", {"kind": "no_done"})
    got: list[str] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.2)) as client:
        with pytest.raises(httpx.ReadTimeout):
            async with client.stream("POST", openai_url(sim), json=openai_body(stream=True)) as r:
                async for chunk in r.aiter_text():
                    got.append(chunk)
    data = [d for _, d in parse_sse("".join(got))]
    assert "[DONE]" not in data
    assert json.loads(data[-1])["choices"][0]["finish_reason"] == "stop"
    await asyncio.wait_for(sim.state.wait_idle(), 2)
    assert (await last_attempt(sim)).outcome == "no_done"
    assert sim.state.inflight == 0


async def test_no_done_with_hold_then_closes(sim, http):
    """no_done with 'seconds' closes the stream cleanly after the hold, still without [DONE]."""
    await set_faults(sim, "anthropic-us-east", {"kind": "no_done", "seconds": 0.05})
    r = await http.post(anthropic_url(sim), json=anthropic_body(stream=True))
    names = [e for e, _ in json_events(r.text)]
    assert names[-1] == "message_delta" and "message_stop" not in names
    assert (await last_attempt(sim)).outcome == "no_done"


@pytest.mark.parametrize("endpoint", ["anthropic-us-east", "openai-us", "gemini-flash"])
async def test_error_event_inside_200_stream(sim, http, endpoint):
    """stream_error_event puts the provider's error object in a 200 stream and ends it."""
    await set_faults(sim, endpoint, {"kind": "stream_error_event", "after_tokens": 2})
    if endpoint == "anthropic-us-east":
        r = await http.post(anthropic_url(sim), json=anthropic_body(stream=True))
        event, data = json_events(r.text)[-1]
        assert event == "error" and data["error"]["type"] == "overloaded_error"
    elif endpoint == "openai-us":
        r = await http.post(openai_url(sim), json=openai_body(stream=True))
        event, data = json_events(r.text)[-1]
        assert data["error"]["type"] == "server_error"
    else:
        r = await http.post(gemini_url(sim, stream=True), json=gemini_body())
        event, data = json_events(r.text)[-1]
        assert data["error"]["status"] == "UNAVAILABLE"
    assert r.status_code == 200
    assert (await last_attempt(sim)).outcome == "stream_error_event"


# --- output faults ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [("anthropic-us-east", "refusal"), ("openai-us", "content_filter"), ("gemini-flash", "SAFETY")],
)
async def test_content_filter_finish_variants(sim, http, endpoint, expected):
    """content_filter mode=finish returns partial text with the refusal finish reason."""
    await set_faults(sim, endpoint, {"kind": "content_filter", "mode": "finish"})
    if endpoint == "anthropic-us-east":
        got = (await http.post(anthropic_url(sim), json=anthropic_body())).json()["stop_reason"]
    elif endpoint == "openai-us":
        r = await http.post(openai_url(sim), json=openai_body())
        got = r.json()["choices"][0]["finish_reason"]
    else:
        r = await http.post(gemini_url(sim), json=gemini_body())
        got = r.json()["candidates"][0]["finishReason"]
    assert got == expected


async def test_invalid_json_in_json_mode(sim, http):
    """invalid_json makes a JSON-mode reply unparseable."""
    await set_faults(sim, "openai-us", {"kind": "invalid_json"})
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
    r = await http.post(openai_url(sim), json=openai_body(response_format=fmt))
    with pytest.raises(ValueError):
        json.loads(r.json()["choices"][0]["message"]["content"])


async def test_invalid_json_ignored_outside_json_mode(sim, http):
    """JSON-only faults do not fire (nor get logged) on plain-text requests."""
    await set_faults(sim, "openai-us", {"kind": "invalid_json"})
    r = await http.post(openai_url(sim), json=openai_body())
    assert r.json()["choices"][0]["message"]["content"].endswith(END_MARKER)
    assert (await last_attempt(sim)).faults == []


async def test_schema_violation_in_json_mode(sim, http):
    """schema_violation returns valid JSON that fails the requested schema."""
    await set_faults(sim, "gemini-flash", {"kind": "schema_violation"})
    cfg = {
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": SCHEMA}
    }
    r = await http.post(gemini_url(sim), json=gemini_body(**cfg))
    data = json.loads(r.json()["candidates"][0]["content"]["parts"][0]["text"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


async def test_empty_output(sim, http):
    """empty_output returns no text, zero output tokens and a normal finish."""
    await set_faults(sim, "anthropic-us-east", {"kind": "empty_output"})
    msg = (await http.post(anthropic_url(sim), json=anthropic_body())).json()
    assert msg["content"] == [] and msg["usage"]["output_tokens"] == 0
    r = await http.post(anthropic_url(sim), json=anthropic_body(stream=True))
    deltas = [d for e, d in json_events(r.text) if e == "content_block_delta"]
    assert deltas == []


# --- latency faults (fake clock: asserted, not waited for) --------------------------


async def test_fixed_and_lognormal_latency_add_up(fake_sim, http):
    """latency and lognormal_latency delay the answer by their sum (seen on the fake clock)."""
    await set_faults(
        fake_sim,
        "openai-us",
        {"kind": "latency", "seconds": 2.0},
        {"kind": "lognormal_latency", "median_s": 1.0, "sigma": 0.0001},
    )
    await http.post(openai_url(fake_sim), json=openai_body())
    attempt = await last_attempt(fake_sim)
    assert attempt.faults == ["latency", "lognormal_latency"]
    assert 3.0 < attempt.duration_s < 3.2


async def test_tokens_per_sec_paces_the_stream(fake_sim, http):
    """tokens_per_sec sets generation speed: N tokens take about N / rate seconds."""
    await set_faults(fake_sim, "openai-us", {"kind": "tokens_per_sec", "rate": 10})
    r = await http.post(openai_url(fake_sim), json=openai_body(stream=True))
    tokens = len(parse_sse(r.text)) - 3  # role chunk, finish chunk, [DONE]
    attempt = await last_attempt(fake_sim)
    assert attempt.tokens_sent == tokens
    assert (tokens - 1) / 10 <= attempt.duration_s < tokens / 10 + 0.05


# --- probability, model filter, determinism ------------------------------------------


async def test_probability_is_seeded_and_reproducible(sim, http):
    """A 50% fault fires on some attempts, and the same pattern recurs after a reset."""

    async def pattern() -> list[int]:
        await set_faults(sim, "openai-us", {"kind": "server_error", "probability": 0.5})
        out = []
        for _ in range(16):
            out.append((await http.post(openai_url(sim), json=openai_body())).status_code)
        return out

    first = await pattern()
    sim.state.reset()
    assert await pattern() == first
    assert 500 in first and 200 in first


async def test_model_filter_limits_a_fault(sim, http):
    """A fault with a model filter leaves requests for other models alone."""
    await set_faults(sim, "openai-us", {"kind": "server_error", "model": "gpt-other"})
    assert (await http.post(openai_url(sim), json=openai_body())).status_code == 200
    await set_faults(sim, "openai-us", {"kind": "server_error", "model": "gpt-4.1"})
    assert (await http.post(openai_url(sim), json=openai_body())).status_code == 500


async def test_oversized_output_ignores_max_tokens(sim, http):
    """oversized_output answers with exactly size_bytes of text, whatever max_tokens says."""
    await set_faults(
        sim,
        "openai-us",
        {"kind": "oversized_output", "size_bytes": 300_000},
        {"kind": "tokens_per_sec", "rate": 10_000_000},
    )
    r = await http.post(openai_url(sim), json=openai_body(max_tokens=16))
    text = r.json()["choices"][0]["message"]["content"]
    assert len(text) == 300_000 and text.endswith(END_MARKER)
    assert r.json()["choices"][0]["finish_reason"] == "stop"
    assert (await last_attempt(sim)).faults == ["oversized_output", "tokens_per_sec"]


async def test_oversized_output_streams_in_large_pieces(sim, http):
    """Streamed, the runaway reply arrives in 16 KiB pieces, not one event per token."""
    await set_faults(
        sim,
        "anthropic-us-east",
        {"kind": "oversized_output", "size_bytes": 200_000},
        {"kind": "tokens_per_sec", "rate": 10_000_000},
    )
    r = await http.post(anthropic_url(sim), json=anthropic_body(stream=True))
    deltas = [
        d["delta"]["text"] for _, d in json_events(r.text) if d.get("type") == "content_block_delta"
    ]
    assert len("".join(deltas)) == 200_000 and len(deltas) == -(-200_000 // (16 * 1024))


def test_oversized_output_needs_a_size():
    """The fault names its missing parameter."""
    with pytest.raises(ValueError, match="size_bytes"):
        Fault(kind=FaultKind.OVERSIZED_OUTPUT)
