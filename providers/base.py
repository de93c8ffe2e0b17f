"""One attempt in flight and the HTTP steps it takes: resolve, build, sign, send, read.

:class:`Call` holds an attempt's inputs, its clock and its secrets: the key and the
endpoint's extra headers are read from the environment at call time, a route that
authenticates through a cloud credential chain gets its signer (:mod:`providers.auth`).
The steps below build the POST (the endpoint's query parameters merged into the URL),
sign it within the budget, hold an endpoint connection slot, send once, classify a
non-2xx answer from its bounded body, and read a JSON reply within the reply size
bound. Each step turns its failure into exactly one
:class:`~resilience.errors.ProviderError`; :mod:`providers.pipeline` strings them
together and :mod:`providers.pump` reads streams.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_failover.providers.auth import Signer, credentials_for
from agent_failover.providers.classify import Phase, classify_exception, classify_status
from agent_failover.providers.client import Budgets, FailoverHTTPClient
from agent_failover.providers.wire import SHAPE_ERRORS, ReplyParts, reasoning_origin
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
from agent_failover.resilience.models import ChatReply, ChatRequest, Usage

#: ``on_progress(text_so_far, tokens)``; may be sync or async (e.g. an activity heartbeat).
ProgressCallback = Callable[[str, int], Awaitable[None] | None]

#: Minimum gap between two progress reports (the first token is always reported).
PROGRESS_INTERVAL_S = 0.1
#: Most bytes of an error body read for classification.
MAX_ERROR_BODY_BYTES = 64 * 1024
#: Room for a JSON reply's envelope (ids, usage, finish reason) beyond its text.
JSON_ENVELOPE_BYTES = 64 * 1024

#: Exceptions an httpx call can raise besides its own tree (InvalidURL and the stream
#: misuse errors do not derive from httpx.HTTPError; OSError can escape custom transports).
CALL_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError)


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
    #: Loop time before which a progress report is not due (the first is due at once).
    next_progress_at: float = field(default=float("-inf"), init=False)

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

    @property
    def origin(self) -> str:
        """Where this reply's reasoning state is valid: its wire and model."""
        return reasoning_origin(self.endpoint)

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
            reasoning=parts.reasoning,
        )

    async def progress(self, text: str, *, final: bool = False) -> None:
        """Report progress, at most every :data:`PROGRESS_INTERVAL_S` (first and final always)."""
        if self.on_progress is None:
            return
        now = self.clock()
        if not final and now < self.next_progress_at:
            return
        self.next_progress_at = now + PROGRESS_INTERVAL_S
        result = self.on_progress(text, estimate_tokens(text))
        if result is not None and inspect.isawaitable(result):
            await result


@asynccontextmanager
async def slot(call: Call) -> AsyncIterator[None]:
    """An endpoint connection slot when the client keeps them, else nothing to hold."""
    if isinstance(call.client, FailoverHTTPClient):
        budgets = call.budgets
        async with call.client.endpoint_slots.acquire(
            call.endpoint, budgets.connect_s, budgets.bulkhead
        ):
            yield
    else:
        yield


@functools.lru_cache(maxsize=256)
def _target(url: str, query: tuple[tuple[str, str], ...]) -> httpx.URL:
    """``url`` parsed, the endpoint's ``query`` merged in; kept, as an endpoint's URL is the
    same call after call and parsing it was a third of building the request (a URL is
    immutable; one httpx cannot parse raises here every time, as it is not kept)."""
    target = httpx.URL(url)
    if query:
        # params= would replace the URL's own query (api-version, alt=sse): merge instead.
        target = target.copy_merge_params(dict(query))
    return target


def _build_request(call: Call, url: str, headers: dict[str, str], body: Any) -> httpx.Request:
    """The POST request, with httpx's own timeouts as a backstop to the budgets.

    The endpoint's extra headers go under the adapter's own (content type, auth); its
    query parameters are merged into the URL's.
    """
    try:
        return call.client.build_request(
            "POST",
            _target(url, tuple(call.endpoint.query.items())),
            json=body,
            headers={**call.extra_headers, **headers},
            timeout=call.budgets.httpx_timeout(),
        )
    except CALL_ERRORS as exc:  # a URL httpx cannot use is this route's problem
        raise classify_exception(exc, endpoint=call.name, phase=Phase.BEFORE_HEADERS) from exc


async def prepare(
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


async def send(call: Call, request: httpx.Request, deadline: float) -> httpx.Response:
    """Send once and return at the response headers; nothing here retries."""
    try:
        async with asyncio.timeout_at(deadline):
            return await call.client.send(request, stream=True)
    except TimeoutError as exc:
        raise NoResponseError(
            f"no response headers within {deadline - call.started:.3g}s", endpoint=call.name
        ) from exc
    except CALL_ERRORS as exc:
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


async def read_json_reply(call: Call, response: httpx.Response, deadline: float) -> bytes:
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
    except CALL_ERRORS as exc:
        raise classify_exception(exc, endpoint=call.name, phase=Phase.STREAMING) from exc
    return b"".join(chunks)


async def raise_for_status(call: Call, response: httpx.Response) -> None:
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


def parse_json_reply(
    call: Call, raw: bytes, parse: Callable[[Any], ReplyParts], status: int
) -> ReplyParts:
    """A JSON reply body read with ``parse``, the prefix prepended, within the size bound."""
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise MalformedStreamError(
            "response body is not JSON", endpoint=call.name, status=status
        ) from exc
    try:
        parts = parse(payload)
    except SHAPE_ERRORS as exc:
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
