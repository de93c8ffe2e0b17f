"""The provider contract: what a vendor's wire format is, and nothing else.

A :class:`WireAdapter` says how one vendor's HTTP API is spoken: the headers of a call
(its auth header, from the key the pipeline resolved), the body built from a
:class:`~resilience.models.ChatRequest`, the URL, how a JSON reply reads into
:class:`ReplyParts`, and a :class:`StreamState` that folds the vendor's stream events
(SSE, or AWS event-stream frames through :meth:`StreamState.new_decoder`) into text
deltas and, at the end, the reply's parts. The vendor's in-band error signals belong
to the adapter too: a refusal, a content-filter finish, an error object inside a 200
reply or stream raise their typed error (:func:`providers.classify.stream_error_event`
for error objects) from :meth:`WireAdapter.parse_reply` or the stream state.

Everything else is shared and lives in :mod:`providers.pipeline`: resolving keys and
secret headers, signing, sending once over the one ``httpx.AsyncClient``, the budgets,
the streaming pump, the size bounds, and classifying HTTP statuses, headers, error
bodies and exceptions into the typed error tree (:mod:`providers.classify`). That
classification reads every vendor's spellings on every route (:mod:`providers.vendor_hints`),
because gateways and compatible servers mix them: an AWS API Gateway names its errors
in ``x-amzn-ErrorType`` whatever sits behind it.

The adapter never sees the client, the clock or the environment; it reads the attempt
through the narrow :class:`Attempt` view.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_failover.providers.sse import SSEDecoder, SSEEvent
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.models import ChatRequest, FinishReason, Reasoning, ToolCall

#: More malformed events than this fail the stream, whatever its length.
MAX_MALFORMED_EVENTS = 3
#: ... and so does a malformed share above this, once the stream has enough events to judge.
MAX_MALFORMED_RATIO = 0.10
MIN_EVENTS_FOR_RATIO = 10

#: ``json.loads`` for text without its per-call argument checks (one event, one call).
_json_decode = json.JSONDecoder().decode

#: Shape errors while reading a JSON payload that parsed but is not what the wire promises.
SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError)


class Attempt(Protocol):
    """What an adapter reads of the attempt in flight (:class:`providers.base.Call`)."""

    request: ChatRequest
    #: Text the reply continues (the prefill as :meth:`WireAdapter.prefix` gave it).
    prefix: str

    @property
    def name(self) -> str:
        """The endpoint name every error carries."""
        ...

    @property
    def origin(self) -> str:
        """Where reasoning state of this reply is valid (:func:`reasoning_origin`)."""
        ...


def reasoning_origin(endpoint: EndpointConfig) -> str:
    """``"<wire>:<model>"``: reasoning state is valid only on the wire and model that made it."""
    return f"{endpoint.provider.value}:{endpoint.model}"


def carried(reasoning: Reasoning | None, endpoint: EndpointConfig) -> Reasoning | None:
    """``reasoning`` when it came from ``endpoint``'s wire and model, else ``None`` (dropped)."""
    if reasoning is None or reasoning.origin != reasoning_origin(endpoint):
        return None
    return reasoning


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
    reasoning: Reasoning | None = None


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
    """Folds one provider's stream events into text, tool calls, usage and a finish reason.

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
        except SHAPE_ERRORS:
            self.malformed += 1

    def decode(self, event: SSEEvent) -> Any:
        """The JSON payload of an event, or ``None`` (counted) when it does not parse."""
        try:
            return _json_decode(event.data)
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

    def reply_parts(self) -> ReplyParts:
        """The completed stream's reply (after :meth:`finalize`)."""
        self.finalize()
        return ReplyParts(
            text=self.text,
            model=self.model,
            finish=self.finish or FinishReason.STOP,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            tool_calls=self.tool_calls(),
            reasoning=self.reasoning(),
        )

    def reasoning(self) -> Reasoning | None:
        """The turn's reasoning state, for wires that carry it beside the calls."""
        return None

    def add_text(self, delta: str) -> None:
        """Append generated text; counts as a token for time-to-first-token."""
        if delta:
            self.text += delta
            self.text_bytes += (
                len(delta) if delta.isascii() else len(delta.encode("utf-8", errors="replace"))
            )
            self.content_events += 1

    def too_malformed(self) -> bool:
        """Whether the skipped events exceed the absolute or relative threshold."""
        if self.malformed > MAX_MALFORMED_EVENTS:
            return True
        return (
            self.events >= MIN_EVENTS_FOR_RATIO
            and self.malformed / self.events > MAX_MALFORMED_RATIO
        )


class WireAdapter(Protocol):
    """One vendor's wire format; implement it (subclass it for the defaults) and register it.

    Every method is pure: no IO, no clock, no environment. The pipeline calls, in order,
    :meth:`prefix`, :meth:`check`, :meth:`body`, :meth:`headers` and :meth:`url`, then
    :meth:`parse_reply` for a JSON answer or :meth:`stream_state` for a stream. An error
    raised by :meth:`check` or :meth:`body` (a request this route cannot serve) must be a
    :class:`~resilience.errors.ProviderError`.
    """

    def prefix(self, request: ChatRequest) -> str:
        """The text the reply continues (the prefill as sent); part of the returned text."""
        return request.prefill or ""

    def check(self, endpoint: EndpointConfig, *, stream: bool) -> None:
        """Refuse the call before anything is sent (e.g. a missing optional dependency)."""
        return None

    def headers(self, key: str | None, *, stream: bool) -> dict[str, str]:
        """The call's headers; ``key`` (when the route has one) goes only into its auth header.

        The endpoint's extra headers go under these; a cloud signer adds its own after.
        """
        ...

    def body(self, endpoint: EndpointConfig, request: ChatRequest, *, stream: bool) -> Any:
        """The JSON request body for ``request`` on ``endpoint``."""
        ...

    def url(self, endpoint: EndpointConfig, *, stream: bool) -> str:
        """The URL posted to (the endpoint's query parameters are merged in afterwards)."""
        ...

    def parse_reply(self, call: Attempt, payload: Any) -> ReplyParts:
        """Read a parsed JSON reply; a shape error here is a malformed reply."""
        ...

    def stream_state(self, call: Attempt) -> StreamState:
        """A fresh fold for one streamed reply."""
        ...
