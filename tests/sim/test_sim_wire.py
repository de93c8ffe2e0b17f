"""Wire formats over a real socket with raw httpx: request, response, SSE, usage, JSON mode."""

from __future__ import annotations

import json

import jsonschema
import pytest

from agent_failover.testing.sim.content import END_MARKER
from tests.sim.simtest_helpers import (
    ANTHROPIC_MODEL,
    GEMINI_MODEL,
    OPENAI_MODEL,
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
    "properties": {
        "title": {"type": "string", "minLength": 3},
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "level": {"enum": ["low", "mid", "high"]},
    },
    "required": ["title", "score", "tags", "level"],
    "additionalProperties": False,
}


async def test_anthropic_non_stream_message_shape(sim, http):
    """A Messages call returns a message object with text, stop reason and usage."""
    r = await http.post(anthropic_url(sim), json=anthropic_body("Explain tidal pools please"))
    assert r.status_code == 200
    assert r.headers["request-id"].startswith("req_sim_")
    msg = r.json()
    assert msg["type"] == "message" and msg["role"] == "assistant"
    assert msg["model"] == ANTHROPIC_MODEL and msg["id"].startswith("msg_")
    assert msg["stop_reason"] == "end_turn" and msg["stop_sequence"] is None
    text = msg["content"][0]["text"]
    assert msg["content"][0]["type"] == "text"
    assert text.startswith("[echo: Explain tidal pools please]") and text.endswith(END_MARKER)
    assert msg["usage"]["output_tokens"] == -(-len(text) // 4)
    assert msg["usage"]["input_tokens"] == -(-len("Explain tidal pools please") // 4)


async def test_anthropic_stream_event_order_and_usage(sim, http):
    """The Anthropic stream has the documented event order and the same text and usage."""
    plain = (await http.post(anthropic_url(sim), json=anthropic_body())).json()
    r = await http.post(anthropic_url(sim), json=anthropic_body(stream=True))
    assert r.headers["content-type"].startswith("text/event-stream")
    events = json_events(r.text)
    names = [e for e, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}
    assert all(e == d["type"] for e, d in events)
    text = "".join(d["delta"]["text"] for e, d in events if e == "content_block_delta")
    assert text == plain["content"][0]["text"]
    delta = next(d for e, d in events if e == "message_delta")
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"]["output_tokens"] == plain["usage"]["output_tokens"]
    assert events[0][1]["message"]["usage"]["input_tokens"] == plain["usage"]["input_tokens"]


async def test_openai_non_stream_completion_shape(sim, http):
    """A Chat Completions call returns a chat.completion with a message and usage."""
    r = await http.post(openai_url(sim), json=openai_body("Summarise the water cycle"))
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == OPENAI_MODEL
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["role"] == "assistant"
    assert choice["message"]["content"].startswith("[echo: Summarise the water cycle]")
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_openai_stream_chunks_usage_and_done(sim, http):
    """The OpenAI stream ends finish chunk, usage chunk (when asked), then [DONE]."""
    plain = (await http.post(openai_url(sim), json=openai_body())).json()
    body = openai_body(stream=True, stream_options={"include_usage": True})
    r = await http.post(openai_url(sim), json=body)
    raw = parse_sse(r.text)
    assert raw[-1] == (None, "[DONE]")
    chunks = [json.loads(d) for _, d in raw[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == plain["usage"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
    assert text == plain["choices"][0]["message"]["content"]


async def test_openai_stream_without_include_usage_has_no_usage_chunk(sim, http):
    """Without stream_options.include_usage no chunk carries usage."""
    r = await http.post(openai_url(sim), json=openai_body(stream=True))
    chunks = [json.loads(d) for _, d in parse_sse(r.text)[:-1]]
    assert all("usage" not in c for c in chunks)


async def test_openai_compatible_endpoint_and_models_list(sim, http):
    """cheap-mini speaks the OpenAI format for its own model and lists it at /v1/models."""
    models = (await http.get(f"{sim.base_url('cheap-mini')}/models")).json()
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["mistral-small-latest"]
    body = {"model": "mistral-small-latest", "messages": [{"role": "user", "content": "hi"}]}
    r = await http.post(openai_url(sim, "cheap-mini"), json=body)
    assert r.status_code == 200 and r.json()["model"] == "mistral-small-latest"


async def test_gemini_non_stream_shape(sim, http):
    """generateContent returns candidates, usageMetadata and modelVersion."""
    r = await http.post(gemini_url(sim), json=gemini_body("Describe alpine lakes"))
    assert r.status_code == 200
    body = r.json()
    cand = body["candidates"][0]
    assert cand["content"]["role"] == "model" and cand["finishReason"] == "STOP"
    text = cand["content"]["parts"][0]["text"]
    assert text.startswith("[echo: Describe alpine lakes]")
    usage = body["usageMetadata"]
    assert usage["candidatesTokenCount"] == -(-len(text) // 4)
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
    assert body["modelVersion"] == GEMINI_MODEL


async def test_gemini_sse_stream_matches_non_stream(sim, http):
    """streamGenerateContent?alt=sse yields the same text, finishReason last, final usage."""
    plain = (await http.post(gemini_url(sim), json=gemini_body())).json()
    r = await http.post(gemini_url(sim, stream=True), json=gemini_body())
    chunks = [d for _, d in json_events(r.text)]
    text = "".join(
        p.get("text", "") for c in chunks for p in c["candidates"][0]["content"].get("parts", [])
    )
    assert text == plain["candidates"][0]["content"]["parts"][0]["text"]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    assert chunks[-1]["usageMetadata"] == plain["usageMetadata"]


async def test_gemini_stream_without_alt_sse_returns_json_array(sim, http):
    """Without alt=sse the stream method answers one JSON array, as the REST API does."""
    url = f"{sim.base_url('gemini-flash')}/v1beta/models/{GEMINI_MODEL}:streamGenerateContent"
    r = await http.post(url, json=gemini_body())
    body = r.json()
    assert isinstance(body, list) and body[0]["candidates"][0]["finishReason"] == "STOP"


async def test_max_tokens_truncates_with_length_finish(sim, http):
    """A reply longer than max_tokens is cut to it and finishes with the length reason."""
    r = await http.post(anthropic_url(sim), json=anthropic_body(max_tokens=5))
    msg = r.json()
    assert msg["stop_reason"] == "max_tokens" and msg["usage"]["output_tokens"] == 5
    assert len(msg["content"][0]["text"]) == 20
    r = await http.post(openai_url(sim), json=openai_body(max_completion_tokens=3))
    assert r.json()["choices"][0]["finish_reason"] == "length"
    cfg = {"generationConfig": {"maxOutputTokens": 4}}
    r = await http.post(gemini_url(sim), json=gemini_body(**cfg))
    assert r.json()["candidates"][0]["finishReason"] == "MAX_TOKENS"


async def test_same_request_same_reply_different_request_different_reply(sim, http):
    """Content is a deterministic function of model and messages."""
    a1 = (await http.post(openai_url(sim), json=openai_body("alpha question"))).json()
    a2 = (await http.post(openai_url(sim), json=openai_body("alpha question"))).json()
    b = (await http.post(openai_url(sim), json=openai_body("beta question"))).json()
    text = [x["choices"][0]["message"]["content"] for x in (a1, a2, b)]
    assert text[0] == text[1] and text[0] != text[2]
    assert a1["id"] != a2["id"]


async def test_openai_json_schema_response_format(sim, http):
    """response_format json_schema yields JSON that satisfies the schema."""
    fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMA, "strict": True}}
    r = await http.post(openai_url(sim), json=openai_body(response_format=fmt))
    jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), SCHEMA)


async def test_openai_json_object_mode(sim, http):
    """response_format json_object yields a JSON object echoing the prompt."""
    fmt = {"type": "json_object"}
    r = await http.post(openai_url(sim), json=openai_body("list rivers", response_format=fmt))
    data = json.loads(r.json()["choices"][0]["message"]["content"])
    assert isinstance(data, dict) and data["echo"] == "list rivers"


async def test_openai_forced_tool_call_streams_arguments(sim, http):
    """A forced function tool yields tool_calls whose streamed arguments fit the schema."""
    tools = [{"type": "function", "function": {"name": "rate", "parameters": SCHEMA}}]
    choice = {"type": "function", "function": {"name": "rate"}}
    body = openai_body(tools=tools, tool_choice=choice)
    msg = (await http.post(openai_url(sim), json=body)).json()["choices"][0]
    assert msg["finish_reason"] == "tool_calls"
    call = msg["message"]["tool_calls"][0]
    jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMA)
    r = await http.post(openai_url(sim), json={**body, "stream": True})
    chunks = [json.loads(d) for _, d in parse_sse(r.text)[:-1]]
    args = "".join(
        tc["function"].get("arguments", "")
        for c in chunks
        for tc in c["choices"][0]["delta"].get("tool_calls") or []
    )
    assert args == call["function"]["arguments"]


async def test_anthropic_forced_tool_and_json_prompt(sim, http):
    """A forced tool yields a tool_use block; a prompt asking for JSON yields JSON text."""
    tools = [{"name": "rate", "description": "rate it", "input_schema": SCHEMA}]
    body = anthropic_body(tools=tools, tool_choice={"type": "tool", "name": "rate"})
    msg = (await http.post(anthropic_url(sim), json=body)).json()
    assert msg["stop_reason"] == "tool_use"
    block = msg["content"][0]
    assert block["type"] == "tool_use" and block["name"] == "rate"
    jsonschema.validate(block["input"], SCHEMA)
    r = await http.post(anthropic_url(sim), json={**body, "stream": True})
    events = json_events(r.text)
    partial = "".join(d["delta"]["partial_json"] for e, d in events if e == "content_block_delta")
    assert json.loads(partial) == block["input"]
    body = anthropic_body("Reply in JSON with the river names", system="You output JSON only.")
    text = (await http.post(anthropic_url(sim), json=body)).json()["content"][0]["text"]
    assert isinstance(json.loads(text), dict)


async def test_anthropic_output_config_format_answers_schema_text(sim, http):
    """Structured outputs (``output_config.format``, or the beta ``output_format``): the
    answer is a text block of JSON valid against the schema, streamed as text deltas; with
    a tool offered under ``auto`` the tool is called first, then the schema answered."""
    fmt = {"type": "json_schema", "schema": SCHEMA}
    for extra in ({"output_config": {"format": fmt}}, {"output_format": fmt}):
        msg = (await http.post(anthropic_url(sim), json={**anthropic_body(), **extra})).json()
        assert msg["stop_reason"] == "end_turn" and msg["content"][0]["type"] == "text"
        jsonschema.validate(json.loads(msg["content"][0]["text"]), SCHEMA)
    body = {**anthropic_body(stream=True), "output_config": {"format": fmt}}
    events = json_events((await http.post(anthropic_url(sim), json=body)).text)
    text = "".join(d["delta"]["text"] for e, d in events if e == "content_block_delta")
    jsonschema.validate(json.loads(text), SCHEMA)
    tools = [{"name": "lookup", "description": "look up", "input_schema": {"type": "object"}}]
    body = {
        **anthropic_body(tools=tools, tool_choice={"type": "auto"}),
        "output_config": {"format": fmt},
    }
    msg = (await http.post(anthropic_url(sim), json=body)).json()
    assert msg["stop_reason"] == "tool_use" and msg["content"][-1]["name"] == "lookup"


async def test_gemini_response_schema_json(sim, http):
    """Gemini JSON mode honours an upper-case OpenAPI responseSchema."""
    schema = {
        "type": "OBJECT",
        "properties": {
            "name": {"type": "STRING"},
            "count": {"type": "INTEGER", "nullable": True},
            "kind": {"type": "STRING", "enum": ["a", "b"]},
        },
        "required": ["name", "kind"],
    }
    cfg = {"generationConfig": {"responseMimeType": "application/json", "responseSchema": schema}}
    r = await http.post(gemini_url(sim), json=gemini_body(**cfg))
    data = json.loads(r.json()["candidates"][0]["content"]["parts"][0]["text"])
    assert set(data) >= {"name", "kind"} and data["kind"] in ("a", "b")


@pytest.mark.parametrize(
    ("url_fn", "body", "status", "check"),
    [
        (
            anthropic_url,
            {"model": ANTHROPIC_MODEL, "messages": [{"role": "user", "content": "x"}]},
            400,
            lambda b: b["error"]["type"] == "invalid_request_error",
        ),
        (
            anthropic_url,
            {**anthropic_body(), "model": "claude-nope"},
            404,
            lambda b: b["error"]["type"] == "not_found_error",
        ),
        (
            openai_url,
            {**openai_body(), "model": "gpt-nope"},
            404,
            lambda b: b["error"]["code"] == "model_not_found",
        ),
        (
            openai_url,
            {"model": OPENAI_MODEL, "messages": []},
            400,
            lambda b: b["error"]["type"] == "invalid_request_error",
        ),
    ],
)
async def test_invalid_requests_are_rejected_in_wire_format(sim, http, url_fn, body, status, check):
    """Missing fields and unknown models get the provider's own 400/404 bodies."""
    r = await http.post(url_fn(sim), json=body)
    assert r.status_code == status and check(r.json())
    assert (await sim.admin().attempts())[-1].outcome == "error"


async def test_unknown_endpoint_and_path(sim, http):
    """Unknown endpoints and unknown paths under a known endpoint answer 404."""
    assert (await http.post(f"{sim.url}/nope/v1/messages", json={})).status_code == 404
    r = await http.post(f"{sim.base_url('anthropic-us-east')}/v1/complete", json={})
    assert r.status_code == 404 and r.json()["type"] == "error"


async def test_non_json_body_is_a_400(sim, http):
    """A body that is not JSON is rejected as an invalid request."""
    r = await http.post(openai_url(sim), content=b"{not json")
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


async def test_require_auth_rejects_missing_key(http):
    """With require_auth the simulator answers 401 without the provider's key header."""
    from agent_failover.testing.sim.config import load_sim_config
    from agent_failover.testing.sim.server import start_simulator

    cfg = load_sim_config().model_copy(update={"require_auth": True})
    server = await start_simulator(config=cfg)
    try:
        url = f"{server.base_url('anthropic-us-east')}/v1/messages"
        assert (await http.post(url, json=anthropic_body())).status_code == 401
        ok = await http.post(url, json=anthropic_body(), headers={"x-api-key": "k"})
        assert ok.status_code == 200
    finally:
        await server.stop()


async def test_tcp_nodelay_is_set_on_accepted_sockets(sim, http):
    """Accepted sockets have TCP_NODELAY (checked on the admin request's own socket)."""
    health = (await http.get(f"{sim.url}/_admin/health")).json()
    assert health["tcp_nodelay"] is True


async def test_gemini_unknown_model_in_path(sim, http):
    """A Gemini model not hosted by the endpoint is NOT_FOUND."""
    r = await http.post(gemini_url(sim, model="gemini-0"), json=gemini_body())
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND"


async def test_streams_are_paced_and_use_one_piece_per_token(sim, http):
    """Every streamed delta carries at most 4 characters, one per counted token."""
    async with http.stream("POST", openai_url(sim), json=openai_body(stream=True)) as r:
        raw = "".join([chunk async for chunk in r.aiter_text()])
    deltas = [json.loads(d)["choices"][0]["delta"].get("content") for _, d in parse_sse(raw)[1:-2]]
    assert deltas and all(d is not None and 1 <= len(d) <= 4 for d in deltas)
