"""The call skeleton every adapter shares: one attempt, budgets enforced, errors classified.

An adapter only knows its wire format: how to build the request body, how to read a
JSON reply into :class:`ReplyParts`, and a :class:`StreamState` that folds its stream
events (SSE, or AWS event-stream frames through :meth:`StreamState.new_decoder`). This
module does the rest, identically for every provider: resolve the key and the
endpoint's extra headers at call time, add the endpoint's query parameters, sign the
request when the route authenticates through a cloud credential chain
(:mod:`providers.auth`), hold an endpoint connection slot, send once, enforce the
:class:`Budgets` around every chunk (headers, first token, idle gap, total, trailer
grace), skip and count malformed events, report progress, and turn every failure into
exactly one :class:`~resilience.errors.ProviderError` with the partial text and without
any key, token or secret header value.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from agent_failover.providers.auth import Signer, credentials_for
from agent_failover.providers.classify import (
    Phase,
    StreamEnd,
    classify_exception,
    classify_status,
    classify_stream_end,
)
from agent_failover.providers.client import Budgets, FailoverHTTPClient
from agent_failover.providers.sse import SSEDecoder, SSEEvent
from agent_failover.resilience.endpoint import AuthMethod, EndpointConfig
from agent_failover.resilience.errors import (
    AuthError,
    ConnectError,
    MalformedStreamError,
    NoResponseError,
    OversizedOutputError,
    ProviderError,
)
from agent_failover.resilience.estimate import estimate_request_tokens, estimate_tokens
from agent_failover.resilience.models import ChatReply, ChatRequest, FinishReason, ToolCall, Usage

#: ``on_progress(text_so_far, tokens)``; may be sync or async (e.g. an activity heartbeat).
ProgressCallback = Callable[[str, int], Awaitable[None] | None]

#: More malformed events than this fail the stream, whatever its length.
MAX_MALFORMED_EVENTS = 3
#: ... and so does a malformed share above this, once the stream has enough events to judge.
MAX_MALFORMED_RATIO = 0.10
MIN_EVENTS_FOR_RATIO = 10
#: Minimum gap between two progress reports (the first token is always reported).
PROGRESS_INTERVAL_S = 0.1
#: Most bytes of an error body read for classification.
MAX_ERROR_BODY_BYTES = 64 * 1024
#: After a stream's last event, how long and how much of the body's end (the chunked
#: terminator) is read so the connection goes back to the pool instead of being closed.
STREAM_DRAIN_S = 0.02
STREAM_DRAIN_BYTES = 64 * 1024
#: Room for a JSON reply's envelope (ids, usage, finish reason) beyond its text.
JSON_ENVELOPE_BYTES = 64 * 1024

# Exceptions an httpx call can raise besides its own tree (InvalidURL and the stream
# misuse errors do not derive from httpx.HTTPError; OSError can escape custom transports).
_CALL_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError)
# Shape errors while reading a JSON payload that parsed but is not what the wire promises.
_SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def _env_secret(endpoint: EndpointConfig, var: str, what: str) -> str:
    value = os.environ.get(var, "").strip()
    if not value:
        raise AuthError(
            f"environment variable {var} is not set; set it to the {what} of endpoint "
            f"{endpoint.name!r}",
            endpoint=endpoint.name,
        )
    return value


def resolve_api_key(endpoint: EndpointConfig) -> str | None:
    """The endpoint's key from ``os.environ[endpoint.api_key_env]``, read at call time.

    ``None`` when the route does not authenticate with a key (local or simulated servers,
    or a cloud credential chain). A declared but unset variable fails as
    :class:`AuthError` naming the variable.
    """
    if endpoint.auth is not AuthMethod.API_KEY or not endpoint.api_key_env:
        return None
    return _env_secret(endpoint, endpoint.api_key_env, "API key")


def resolve_extra_headers(endpoint: EndpointConfig) -> dict[str, str]:
    """The endpoint's literal ``headers`` plus ``headers_from_env`` read at call time."""
    headers = dict(endpoint.headers)
    for name, var in endpoint.headers_from_env.items():
        headers[name] = _env_secret(endpoint, var, f"{name} header")
    return headers


class StreamDecoder(Protocol):
    """Sans-IO: bytes in, whole events out (``SSEDecoder``, the AWS event-stream decoder)."""

    def feed(self, chunk: bytes) -> list[Any]: ...

    def flush(self) -> list[Any]: ...


class StreamFramingError(Exception):
    """The stream's framing itself is broken (bad checksum, impossible length): nothing
    after it can be trusted, so the stream fails as malformed at once."""


@dataclass
class ReplyParts:
    """What an adapter read from a reply, before usage fallback, cost and timing."""

    text: str
    model: str | None
    finish: FinishReason
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


def parse_tool_arguments(call_id: str, name: str, raw: Any) -> ToolCall:
    """A :class:`ToolCall` from arguments given as a JSON string or an object.

    Unparseable arguments are recorded in ``raw_arguments`` rather than raised, so the
    reply survives and :mod:`providers.validate` decides.
    """
    if isinstance(raw, dict):
        return ToolCall(id=call_id, name=name, arguments=raw)
    text = raw if isinstance(raw, str) else json.dumps(raw)
    if text.strip() == "":
        return ToolCall(id=call_id, name=name, arguments={})
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(id=call_id, name=name, arguments=parsed)
    return ToolCall(id=call_id, name=name, raw_arguments=text)


class StreamState(ABC):
    """Folds one provider's SSE events into text, tool calls, usage and a finish reason.

    ``finished`` is set by the terminal content event (after which only trailers such as
    usage or ``[DONE]`` may follow, for at most the trailer grace); ``done`` when nothing
    more is expected and reading stops at once.
    """

    def __init__(self, endpoint: str, prefix: str = "") -> None:
        self.endpoint = endpoint
        self.text = prefix
        #: UTF-8 bytes of ``text``, kept incrementally for the reply size limit.
        self.text_bytes = len(prefix.encode("utf-8", errors="replace"))
        self.model: str | None = None
        self.finish: FinishReason | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.finished = False
        self.done = False
        self.events = 0
        self.malformed = 0
        self.content_events = 0

    def new_decoder(self) -> StreamDecoder:
        """The decoder that turns this wire's response bytes into events (SSE by default)."""
        return SSEDecoder()

    def on_event(self, event: SSEEvent) -> None:
        """Fold one event; a malformed one is counted and skipped, never raised."""
        self.events += 1
        payload = self.decode(event)
        if payload is None:
            return
        try:
            self.on_payload(event.event, payload)
        except _SHAPE_ERRORS:
            self.malformed += 1

    def decode(self, event: SSEEvent) -> Any:
        """The JSON payload of an event, or ``None`` (counted) when it does not parse."""
        try:
            return json.loads(event.data)
        except (ValueError, RecursionError):
            self.malformed += 1
            return None

    @abstractmethod
    def on_payload(self, event_name: str, payload: Any) -> None:
        """Apply one parsed event; raise a ProviderError for an in-stream error or refusal."""

    @abstractmethod
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls assembled from the stream so far."""

    def finalize(self) -> None:  # noqa: B027 - a hook: most wires need no final pass
        """Last adjustments once the stream completed (override when the wire needs any)."""

    def add_text(self, delta: str) -> None:
        """Append generated text; counts as a token for time-to-first-token."""
        if delta:
            self.text += delta
            self.text_bytes += len(delta.encode("utf-8", errors="replace"))
            self.content_events += 1

    def too_malformed(self) -> bool:
        """Whether the skipped events exceed the absolute or relative threshold."""
        if self.malformed > MAX_MALFORMED_EVENTS:
            return True
        return (
            self.events >= MIN_EVENTS_FOR_RATIO
            and self.malformed / self.events > MAX_MALFORMED_RATIO
        )


@dataclass
class Call:
    """One attempt in flight: its inputs, its clock, and what it has measured so far.

    Build it with :meth:`start` inside the running loop: the attempt's clock starts there.
    """

    client: httpx.AsyncClient
    endpoint: EndpointConfig
    request: ChatRequest
    budgets: Budgets
    on_progress: ProgressCallback | None = None
    now: Callable[[], float] = time.time
    key: str | None = None
    prefix: str = ""  # text the reply continues (prefill); part of the returned text
    extra_headers: dict[str, str] = field(default_factory=dict)
    signer: Signer | None = None
    started: float = field(default_factory=lambda: asyncio.get_running_loop().time())
    #: Values masked in any error text: the key, secret header values, tokens.
    secrets: list[str] = field(default_factory=list)
    _last_progress: float | None = field(default=None, init=False)

    @classmethod
    def start(
        cls,
        client: httpx.AsyncClient,
        endpoint: EndpointConfig,
        request: ChatRequest,
        budgets: Budgets,
        *,
        on_progress: ProgressCallback | None,
        now: Callable[[], float],
        prefix: str = "",
    ) -> Call:
        """A new attempt, its key and secret headers resolved from the environment.

        A missing variable fails as :class:`AuthError`; routes that sign with a cloud
        credential chain get their client's signer (credentials are fetched at send time).
        """
        key = resolve_api_key(endpoint)
        extra = resolve_extra_headers(endpoint)
        secrets = [key] if key else []
        secrets += [extra[h] for h in endpoint.headers_from_env]
        return cls(
            client=client,
            endpoint=endpoint,
            request=request,
            budgets=budgets,
            on_progress=on_progress,
            now=now,
            key=key,
            prefix=prefix,
            extra_headers=extra,
            signer=credentials_for(client).signer(endpoint),
            secrets=secrets,
        )

    @property
    def streaming(self) -> bool:
        """Stream when the request asks for it and the route supports it."""
        return self.request.stream and self.endpoint.capabilities.streaming

    @property
    def name(self) -> str:
        """The endpoint name every error carries."""
        return self.endpoint.name

    def clock(self) -> float:
        """Monotonic loop time, the clock asyncio deadlines use."""
        return asyncio.get_running_loop().time()

    def elapsed_ms(self) -> float:
        """Milliseconds since the attempt started."""
        return (self.clock() - self.started) * 1000.0

    def redact(self, err: ProviderError) -> ProviderError:
        """``err`` with this call's key and other secrets masked wherever they were echoed."""
        for secret in self.secrets:
            if secret:
                err.message = err.message.replace(secret, "[redacted]")
                err.partial_text = err.partial_text.replace(secret, "[redacted]")
        err.args = (err.message,)
        return err

    def build_reply(self, parts: ReplyParts, *, ttft_ms: float | None, malformed: int) -> ChatReply:
        """The normalized reply: usage (estimated when the provider sent none), cost, timing."""
        in_tok = parts.input_tokens
        out_tok = parts.output_tokens
        if in_tok is None:
            in_tok = estimate_request_tokens(self.request)
        if out_tok is None:
            out_tok = estimate_tokens(parts.text)
        return ChatReply(
            text=parts.text,
            endpoint=self.endpoint.name,
            model=parts.model or self.endpoint.model,
            finish_reason=parts.finish,
            usage=Usage(
                input_tokens=in_tok,
                output_tokens=out_tok,
                estimated=parts.input_tokens is None or parts.output_tokens is None,
            ),
            cost_usd=self.endpoint.prices.cost(in_tok, out_tok),
            ttft_ms=ttft_ms,
            latency_ms=self.elapsed_ms(),
            tool_calls=parts.tool_calls,
            malformed_events_skipped=malformed,
        )

    async def progress(self, text: str, *, final: bool = False) -> None:
        """Report progress, at most every :data:`PROGRESS_INTERVAL_S` (first and final always)."""
        if self.on_progress is None:
            return
        now = self.clock()
        last = self._last_progress
        if not final and last is not None and now - last < PROGRESS_INTERVAL_S:
            return
        self._last_progress = now
        result = self.on_progress(text, estimate_tokens(text))
        if inspect.isawaitable(result):
            await result


@asynccontextmanager
async def _slot(call: Call) -> AsyncIterator[None]:
    """An endpoint connection slot when the client keeps them, else nothing to hold."""
    if isinstance(call.client, FailoverHTTPClient):
        async with call.client.endpoint_slots.acquire(call.endpoint, call.budgets.connect_s):
            yield
    else:
        yield


def _build_request(call: Call, url: str, headers: dict[str, str], body: Any) -> httpx.Request:
    """The POST request, with httpx's own timeouts as a backstop to the budgets.

    The endpoint's extra headers go under the adapter's own (content type, auth); its
    query parameters are merged into the URL's.
    """
    try:
        target = httpx.URL(url)
        if call.endpoint.query:
            # params= would replace the URL's own query (api-version, alt=sse): merge instead.
            target = target.copy_merge_params(call.endpoint.query)
        return call.client.build_request(
            "POST",
            target,
            json=body,
            headers={**call.extra_headers, **headers},
            timeout=call.budgets.httpx_timeout(),
        )
    except _CALL_ERRORS as exc:  # a URL httpx cannot use is this route's problem
        raise classify_exception(exc, endpoint=call.name, phase=Phase.BEFORE_HEADERS) from exc


async def _prepare(
    call: Call, url: str, headers: dict[str, str], body: Any, deadline: float
) -> httpx.Request:
    """Build the request and, for a cloud credential chain, sign it within ``deadline``."""
    request = _build_request(call, url, headers, body)
    if call.signer is None:
        return request
    try:
        async with asyncio.timeout_at(deadline):
            call.secrets += await call.signer.sign(request, call.endpoint, call.now())
    except TimeoutError as exc:
        raise ConnectError(
            f"credentials not obtained within {deadline - call.started:.3g}s", endpoint=call.name
        ) from exc
    return request


async def _send(call: Call, request: httpx.Request, deadline: float) -> httpx.Response:
    """Send once and return at the response headers; nothing here retries."""
    try:
        async with asyncio.timeout_at(deadline):
            return await call.client.send(request, stream=True)
    except TimeoutError as exc:
        raise NoResponseError(
            f"no response headers within {deadline - call.started:.3g}s", endpoint=call.name
        ) from exc
    except _CALL_ERRORS as exc:
        raise classify_exception(exc, endpoint=call.name, phase=Phase.BEFORE_HEADERS) from exc


def json_body_limit(max_reply_bytes: int | None) -> int | None:
    """Most bytes of a JSON reply body read for a reply limit: the text may be escaped
    (up to twice as long) and sits in an envelope."""
    return None if max_reply_bytes is None else 2 * max_reply_bytes + JSON_ENVELOPE_BYTES


def oversized_error(
    endpoint: str, size: int, limit: int, partial: str = "", *, streaming: bool = False
) -> OversizedOutputError:
    """The one error for a reply above the size limit (``size`` is a lower bound when cut)."""
    how = "stream abandoned after" if streaming else "reply of at least"
    return OversizedOutputError(
        f"{how} {size} bytes, above max_reply_bytes {limit}",
        endpoint=endpoint,
        status=200,
        partial_text=partial,
    )


async def _read_json_reply(call: Call, response: httpx.Response, deadline: float) -> bytes:
    """A JSON reply body, bounded by the reply size limit (``oversized_output`` above it)."""
    limit = json_body_limit(call.budgets.max_reply_bytes)
    raw = await _read_body(call, response, deadline, limit)
    if limit is not None and len(raw) >= limit:
        assert call.budgets.max_reply_bytes is not None
        raise oversized_error(call.name, len(raw), call.budgets.max_reply_bytes)
    return raw


async def _read_body(
    call: Call, response: httpx.Response, deadline: float, limit: int | None = None
) -> bytes:
    """The response body, read within ``deadline`` (and up to ``limit`` bytes)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout_at(deadline):
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if limit is not None and size >= limit:
                    break
    except TimeoutError as exc:
        raise NoResponseError(
            f"response body not complete within {deadline - call.started:.3g}s",
            endpoint=call.name,
            status=response.status_code,
        ) from exc
    except _CALL_ERRORS as exc:
        raise classify_exception(exc, endpoint=call.name, phase=Phase.STREAMING) from exc
    return b"".join(chunks)


async def _raise_for_status(call: Call, response: httpx.Response) -> None:
    """Classify a non-2xx answer from its (bounded) body and headers."""
    if 200 <= response.status_code < 300:
        return
    deadline = call.started + call.budgets.total_s
    try:
        body = await _read_body(call, response, deadline, MAX_ERROR_BODY_BYTES)
    except ProviderError:
        body = b""  # the status alone still classifies
    raise classify_status(
        response.status_code, body, response.headers, endpoint=call.name, now=call.now()
    )


def _parse_json_reply(
    call: Call, raw: bytes, parse: Callable[[Any], ReplyParts], status: int
) -> ReplyParts:
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise MalformedStreamError(
            "response body is not JSON", endpoint=call.name, status=status
        ) from exc
    try:
        parts = parse(payload)
    except _SHAPE_ERRORS as exc:
        raise MalformedStreamError(
            f"response body does not have the expected shape ({type(exc).__name__})",
            endpoint=call.name,
            status=status,
        ) from exc
    parts.text = call.prefix + parts.text
    limit = call.budgets.max_reply_bytes
    if limit is not None:
        size = len(parts.text.encode("utf-8", errors="replace"))
        if size > limit:
            raise oversized_error(call.name, size, limit, parts.text)
    return parts


async def run_json(
    call: Call,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    parse: Callable[[Any], ReplyParts],
) -> ChatReply:
    """One non-streaming attempt: bounded by ``connect_s`` and ``total_s``."""
    try:
        deadline = call.started + call.budgets.total_s
        request = await _prepare(call, url, headers, body, deadline)
        async with _slot(call):
            response = await _send(call, request, deadline)
            try:
                await _raise_for_status(call, response)
                raw = await _read_json_reply(call, response, deadline)
            finally:
                await response.aclose()
        parts = _parse_json_reply(call, raw, parse, response.status_code)
        reply = call.build_reply(parts, ttft_ms=None, malformed=0)
        await call.progress(reply.text, final=True)
        return reply
    except ProviderError as err:
        raise call.redact(err) from err.__cause__


async def run_stream(
    call: Call,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    state: StreamState,
    parse: Callable[[Any], ReplyParts],
) -> ChatReply:
    """One streaming attempt with every budget enforced around every chunk.

    A server that ignored ``stream`` and answered with JSON is read with ``parse``.
    """
    try:
        b = call.budgets
        headers_deadline = call.started + min(b.ttft_s, b.total_s)
        request = await _prepare(call, url, headers, body, headers_deadline)
        async with _slot(call):
            response = await _send(call, request, headers_deadline)
            try:
                await _raise_for_status(call, response)
                ctype = response.headers.get("content-type", "").lower()
                if "json" in ctype and "event-stream" not in ctype:
                    raw = await _read_json_reply(call, response, call.started + b.total_s)
                    parts = _parse_json_reply(call, raw, parse, response.status_code)
                    reply = call.build_reply(parts, ttft_ms=call.elapsed_ms(), malformed=0)
                    await call.progress(reply.text, final=True)
                    return reply
                ttft_ms = await _pump(call, response, state)
            finally:
                await response.aclose()
        state.finalize()
        parts = ReplyParts(
            text=state.text,
            model=state.model,
            finish=state.finish or FinishReason.STOP,
            input_tokens=state.input_tokens,
            output_tokens=state.output_tokens,
            tool_calls=state.tool_calls(),
        )
        await call.progress(parts.text, final=True)
        return call.build_reply(parts, ttft_ms=ttft_ms, malformed=state.malformed)
    except ProviderError as err:
        raise call.redact(err) from err.__cause__


async def _pump(call: Call, response: httpx.Response, state: StreamState) -> float | None:
    """Read SSE until the terminal event (plus trailer grace); return the TTFT in ms.

    Each read waits for the earliest applicable deadline: the trailer grace once the
    terminal event arrived, the first-token budget until a token arrived, then the idle
    budget since the last chunk, and always the total budget.
    """
    b = call.budgets
    decoder = state.new_decoder()
    chunks = response.aiter_bytes()
    total_at = call.started + b.total_s
    last_chunk_at = call.clock()
    first_token_at: float | None = None
    finished_at: float | None = None
    eof = False

    def fail(end: StreamEnd, detail: str = "") -> ProviderError:
        return _stream_error(call, state, end, detail)

    while not state.done:
        if finished_at is not None:
            deadline, end = finished_at + b.trailer_grace_s, StreamEnd.COMPLETE
        elif first_token_at is None:
            deadline, end = call.started + b.ttft_s, StreamEnd.FIRST_TOKEN_TIMEOUT
        else:
            deadline, end = last_chunk_at + b.idle_s, StreamEnd.IDLE_TIMEOUT
        if total_at < deadline:
            deadline = total_at
            if end is not StreamEnd.COMPLETE:
                end = (
                    StreamEnd.FIRST_TOKEN_TIMEOUT
                    if first_token_at is None
                    else StreamEnd.TOTAL_TIMEOUT
                )
        try:
            async with asyncio.timeout_at(deadline):
                chunk = await anext(chunks)
        except StopAsyncIteration:
            eof = True
            break
        except TimeoutError as exc:
            if end is StreamEnd.COMPLETE:
                break  # terminal event seen; the missing trailer is not worth waiting for
            raise fail(end, f"after {call.clock() - call.started:.3g}s") from exc
        except _CALL_ERRORS as exc:
            if state.finished:
                break  # the content is complete; a broken trailer does not lose it
            phase = Phase.AWAITING_FIRST_TOKEN if first_token_at is None else Phase.STREAMING
            raise classify_exception(
                exc, endpoint=call.name, phase=phase, partial_text=state.text
            ) from exc
        last_chunk_at = call.clock()
        for event in _decode(call, state, decoder, chunk):
            await _apply(call, state, event)
            if first_token_at is None and state.content_events:
                first_token_at = call.clock()
            if state.finished and finished_at is None:
                finished_at = call.clock()
            if state.done:
                break
    if eof and not state.done:
        for event in decoder.flush():
            await _apply(call, state, event)
    if not eof and state.done:
        await _drain(chunks, min(call.clock() + STREAM_DRAIN_S, total_at))
    if state.too_malformed():
        raise fail(StreamEnd.MALFORMED, f"{state.malformed} of {state.events} events")
    if not state.finished:
        raise fail(StreamEnd.EOF_BEFORE_TERMINAL, f"after {len(state.text)} characters")
    if first_token_at is None:
        return None
    return (first_token_at - call.started) * 1000.0


async def _drain(chunks: AsyncIterator[bytes], deadline: float) -> None:
    """Read what is left of a finished stream, briefly and ignoring it.

    A response closed before its body's end closes its connection: each call then paid a
    new connection (a TLS handshake, with a real provider). The end usually arrives with
    the last event; a server that holds the stream open keeps it closed as before.
    """
    size = 0
    try:
        async with asyncio.timeout_at(deadline):
            async for chunk in chunks:
                size += len(chunk)
                if size > STREAM_DRAIN_BYTES:
                    return
    except (TimeoutError, *_CALL_ERRORS):
        return  # the answer is complete; only the connection's reuse is lost


def _decode(call: Call, state: StreamState, decoder: StreamDecoder, chunk: bytes) -> list[Any]:
    try:
        return decoder.feed(chunk)
    except StreamFramingError as exc:
        raise _stream_error(call, state, StreamEnd.MALFORMED, f"broken framing: {exc}") from exc


async def _apply(call: Call, state: StreamState, event: Any) -> None:
    before = state.content_events
    state.on_event(event)
    if state.too_malformed():
        raise _stream_error(
            call, state, StreamEnd.MALFORMED, f"{state.malformed} of {state.events} events"
        )
    limit = call.budgets.max_reply_bytes
    if limit is not None and state.text_bytes > limit:
        # Stop reading now: an endless or runaway stream must not be buffered to the end.
        raise oversized_error(call.name, state.text_bytes, limit, state.text, streaming=True)
    if state.content_events > before:
        await call.progress(state.text)


def _stream_error(call: Call, state: StreamState, end: StreamEnd, detail: str) -> ProviderError:
    err = classify_stream_end(end, endpoint=call.name, partial_text=state.text, detail=detail)
    # Only StreamEnd.COMPLETE maps to None, and a completed stream never asks for an error.
    return err or MalformedStreamError(detail, endpoint=call.name, partial_text=state.text)
