"""One error root for every way a provider call fails, classified once at the boundary.

Each error says what to do next through :class:`Decision`:

* ``RETRY``    the same route may succeed on another attempt (no earlier than ``retry_after``);
* ``FAILOVER`` move on to the next route now; this route is fine to keep using later;
* ``COOLDOWN`` move on, and do not send this route traffic for ``retry_after`` seconds;
* ``STOP``     no route will succeed with this request: fail the call. A class may ask for
  the same rejection from several *wires* first (``Classification.stop_after_wires``): a
  400 from one vendor's API (a parameter it alone refuses) says nothing about another's,
  so the call moves to a route on another wire and stops only when a second one rejects.

The tree (``ErrorClass`` value in brackets, then decision)::

    ProviderError
    ├── TransportError                       the request did not get a usable HTTP answer
    │   ├── ConnectError        [connect_error]       FAILOVER  refused / reset before headers
    │   ├── NoResponseError     [no_response]         FAILOVER  timed out before headers
    │   └── SlowFirstTokenError [slow_first_token]    FAILOVER  headers, but no token in budget
    ├── HTTPStatusError                      the provider answered with an error status
    │   ├── RateLimitedError    [rate_limited]        COOLDOWN  429 with Retry-After / reset
    │   │                                                       headers; a short one is waited
    │   │                                                       out on the same route
    │   ├── QuotaExhaustedError [quota_exhausted]     COOLDOWN  429 insufficient_quota/spend limit,
    │   │                                                       non-retryable, long cool-down
    │   ├── OverloadedError     [overloaded]          COOLDOWN  Anthropic 529, OpenAI/Gemini 503
    │   ├── ServerError         [server_error]        RETRY     500/502/504, other 5xx
    │   ├── AuthError           [auth]                COOLDOWN  401/403: bad key for *this* route,
    │   │                                                       non-retryable
    │   ├── ModelNotFoundError  [model_not_found]     COOLDOWN  404 / unknown model id: the
    │   │                                                       route is misconfigured
    │   ├── InvalidRequestError [invalid_request]     STOP      400/422 the caller must fix,
    │   │                                                       once a second wire rejects it:
    │   │                                                       the first wire's 400 moves the
    │   │                                                       call to another wire
    │   ├── ContextLengthError  [context_length]      FAILOVER  to a larger window only; carries
    │   │                                                       the window the provider stated
    │   └── ContentFilterError  [content_filter]      FAILOVER  to another model, reason kept
    ├── StreamError                          a 200 stream that did not end properly
    │   ├── StreamStalledError  [stream_stalled]      FAILOVER  no chunk within the idle budget
    │   ├── StreamCutError      [stream_cut]          FAILOVER  ended without the terminal event
    │   ├── MalformedStreamError[malformed_stream]    FAILOVER  events that cannot be trusted
    │   └── StreamErrorEvent    [stream_error_event]  FAILOVER  an error event inside a 200 stream
    │                                                           (overloaded_error → COOLDOWN)
    ├── LocalSaturationError [local_saturation]  FAILOVER  every one of *our own* connection
    │                                                       slots for the endpoint was busy (the
    │                                                       worker's per-endpoint slots or httpx's
    │                                                       pool): the request never left, so it
    │                                                       never counts against the route
    └── SemanticError                        a well-formed reply that is not a usable answer
        ├── EmptyOutputError    [empty_output]        FAILOVER
        ├── TruncatedOutputError[truncated_output]    FAILOVER  finish_reason=length where the
        │                                                       output had to be complete JSON
        ├── InvalidOutputError  [invalid_output]      FAILOVER  not JSON / violates the schema
        ├── MalformedToolCallError [malformed_tool_call] FAILOVER
        └── OversizedOutputError [oversized_output]   FAILOVER  reply above the role's
                                                                max_reply_bytes (never retried
                                                                on the same route)

Errors carry the endpoint name, the HTTP status when there was one, the partial text a
stream delivered before failing, and never a key, header value or request body.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar


class Decision(StrEnum):
    RETRY = "retry"
    FAILOVER = "failover"
    COOLDOWN = "cooldown"
    STOP = "stop"


class ErrorClass(StrEnum):
    CONNECT_ERROR = "connect_error"
    NO_RESPONSE = "no_response"
    SLOW_FIRST_TOKEN = "slow_first_token"
    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    OVERLOADED = "overloaded"
    SERVER_ERROR = "server_error"
    AUTH = "auth"
    INVALID_REQUEST = "invalid_request"
    MODEL_NOT_FOUND = "model_not_found"
    CONTEXT_LENGTH = "context_length"
    CONTENT_FILTER = "content_filter"
    STREAM_STALLED = "stream_stalled"
    STREAM_CUT = "stream_cut"
    MALFORMED_STREAM = "malformed_stream"
    STREAM_ERROR_EVENT = "stream_error_event"
    EMPTY_OUTPUT = "empty_output"
    TRUNCATED_OUTPUT = "truncated_output"
    INVALID_OUTPUT = "invalid_output"
    MALFORMED_TOOL_CALL = "malformed_tool_call"
    OVERSIZED_OUTPUT = "oversized_output"
    LOCAL_SATURATION = "local_saturation"


@dataclass(frozen=True)
class Classification:
    """What an error class means for the caller and for the route's health."""

    decision: Decision
    retryable: bool  # may Temporal retry the *same* activity (same route)?
    counts_against_route: bool  # does it feed the route's error rate / breaker?
    semantic: bool = False  # does it feed the semantic-failure rate instead?
    #: STOP only: how many distinct wires (:attr:`EndpointConfig.wire`) must reject the
    #: same request before the call stops; before that, the call moves to another wire.
    stop_after_wires: int = 1


CLASSIFICATION: dict[ErrorClass, Classification] = {
    ErrorClass.CONNECT_ERROR: Classification(Decision.FAILOVER, True, True),
    ErrorClass.NO_RESPONSE: Classification(Decision.FAILOVER, True, True),
    ErrorClass.SLOW_FIRST_TOKEN: Classification(Decision.FAILOVER, True, True),
    # A 429 says we are over *our* quota window, not that the route is unhealthy: it cools
    # the route down for Retry-After and never feeds the breaker (probes included).
    ErrorClass.RATE_LIMITED: Classification(Decision.COOLDOWN, True, False),
    ErrorClass.QUOTA_EXHAUSTED: Classification(Decision.COOLDOWN, False, True),
    ErrorClass.OVERLOADED: Classification(Decision.COOLDOWN, True, True),
    ErrorClass.SERVER_ERROR: Classification(Decision.RETRY, True, True),
    ErrorClass.AUTH: Classification(Decision.COOLDOWN, False, True),
    # One wire's 400 may be a parameter only that vendor refuses: try another wire's route;
    # a second wire refusing the same request means the request itself is wrong.
    ErrorClass.INVALID_REQUEST: Classification(Decision.STOP, False, False, stop_after_wires=2),
    # The route names a model (or URL) its provider does not serve: a fault of this route's
    # configuration, not of the request, so the call moves on and the route stays away.
    ErrorClass.MODEL_NOT_FOUND: Classification(Decision.COOLDOWN, False, True),
    ErrorClass.CONTEXT_LENGTH: Classification(Decision.FAILOVER, False, False),
    ErrorClass.CONTENT_FILTER: Classification(Decision.FAILOVER, False, False),
    ErrorClass.STREAM_STALLED: Classification(Decision.FAILOVER, True, True),
    ErrorClass.STREAM_CUT: Classification(Decision.FAILOVER, True, True),
    ErrorClass.MALFORMED_STREAM: Classification(Decision.FAILOVER, True, True),
    ErrorClass.STREAM_ERROR_EVENT: Classification(Decision.FAILOVER, True, True),
    ErrorClass.EMPTY_OUTPUT: Classification(Decision.FAILOVER, True, True, semantic=True),
    ErrorClass.TRUNCATED_OUTPUT: Classification(Decision.FAILOVER, True, True, semantic=True),
    ErrorClass.INVALID_OUTPUT: Classification(Decision.FAILOVER, True, True, semantic=True),
    ErrorClass.MALFORMED_TOOL_CALL: Classification(Decision.FAILOVER, True, True, semantic=True),
    # A runaway generation repeats on the same route; the reply could never enter history.
    ErrorClass.OVERSIZED_OUTPUT: Classification(Decision.FAILOVER, False, True, semantic=True),
    # Our own connection slots were all taken: the provider never saw the request, so the
    # route's breaker, windows and timeouts-in-a-row must not hear of it. Another route has
    # its own slots; the same route would queue behind the same calls, so no same-route retry.
    ErrorClass.LOCAL_SATURATION: Classification(Decision.FAILOVER, False, False),
}


class ProviderError(Exception):
    """Root of every provider failure. Subclasses fix ``error_class``."""

    error_class: ClassVar[ErrorClass]

    def __init__(
        self,
        message: str,
        *,
        endpoint: str,
        status: int | None = None,
        retry_after: float | None = None,
        partial_text: str = "",
        decision: Decision | None = None,
        provider_code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.endpoint = endpoint
        self.status = status
        #: The provider's own error code or type (``overloaded_error``, ``RESOURCE_EXHAUSTED``).
        self.provider_code = provider_code
        self.retry_after = retry_after
        self.partial_text = partial_text
        self._decision = decision

    @property
    def classification(self) -> Classification:
        return CLASSIFICATION[self.error_class]

    @property
    def decision(self) -> Decision:
        return self._decision or self.classification.decision

    @property
    def retryable(self) -> bool:
        return self.classification.retryable

    def __str__(self) -> str:
        where = f"{self.endpoint}"
        if self.status is not None:
            where += f" HTTP {self.status}"
        tail = f" (retry after {self.retry_after:.1f}s)" if self.retry_after else ""
        return f"[{self.error_class.value}] {where}: {self.message}{tail}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class TransportError(ProviderError):
    pass


class ConnectError(TransportError):
    error_class = ErrorClass.CONNECT_ERROR


class NoResponseError(TransportError):
    error_class = ErrorClass.NO_RESPONSE


class SlowFirstTokenError(TransportError):
    error_class = ErrorClass.SLOW_FIRST_TOKEN


class HTTPStatusError(ProviderError):
    pass


class RateLimitedError(HTTPStatusError):
    error_class = ErrorClass.RATE_LIMITED


class QuotaExhaustedError(HTTPStatusError):
    error_class = ErrorClass.QUOTA_EXHAUSTED


class OverloadedError(HTTPStatusError):
    error_class = ErrorClass.OVERLOADED


class ServerError(HTTPStatusError):
    error_class = ErrorClass.SERVER_ERROR


class AuthError(HTTPStatusError):
    error_class = ErrorClass.AUTH


class InvalidRequestError(HTTPStatusError):
    error_class = ErrorClass.INVALID_REQUEST


class ModelNotFoundError(HTTPStatusError):
    error_class = ErrorClass.MODEL_NOT_FOUND


class ContextLengthError(HTTPStatusError):
    """The prompt did not fit; ``context_window`` is the limit the provider stated, if any."""

    error_class = ErrorClass.CONTEXT_LENGTH

    def __init__(
        self,
        message: str,
        *,
        context_window: int | None = None,
        prompt_tokens: int | None = None,
        **kw: object,
    ) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        #: The endpoint's real window in tokens, as its rejection stated it.
        self.context_window = context_window
        #: The prompt size the provider counted, when it said.
        self.prompt_tokens = prompt_tokens


class ContentFilterError(HTTPStatusError):
    error_class = ErrorClass.CONTENT_FILTER


class StreamError(ProviderError):
    pass


class StreamStalledError(StreamError):
    error_class = ErrorClass.STREAM_STALLED


class StreamCutError(StreamError):
    error_class = ErrorClass.STREAM_CUT


class MalformedStreamError(StreamError):
    error_class = ErrorClass.MALFORMED_STREAM


class StreamErrorEvent(StreamError):
    error_class = ErrorClass.STREAM_ERROR_EVENT


class LocalSaturationError(ProviderError):
    """Every one of this worker's connection slots for the endpoint stayed busy for the
    connect budget (``bulkhead``: whose slots, when known). Our saturation, not the route's."""

    error_class = ErrorClass.LOCAL_SATURATION

    def __init__(self, message: str, *, bulkhead: str = "", **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.bulkhead = bulkhead


class SemanticError(ProviderError):
    pass


class EmptyOutputError(SemanticError):
    error_class = ErrorClass.EMPTY_OUTPUT


class TruncatedOutputError(SemanticError):
    error_class = ErrorClass.TRUNCATED_OUTPUT


class InvalidOutputError(SemanticError):
    error_class = ErrorClass.INVALID_OUTPUT


class MalformedToolCallError(SemanticError):
    error_class = ErrorClass.MALFORMED_TOOL_CALL


class OversizedOutputError(SemanticError):
    error_class = ErrorClass.OVERSIZED_OUTPUT


ERROR_TYPES: dict[ErrorClass, type[ProviderError]] = {
    cls.error_class: cls
    for cls in (
        ConnectError, NoResponseError, SlowFirstTokenError, RateLimitedError,
        QuotaExhaustedError, OverloadedError, ServerError, AuthError, InvalidRequestError,
        ModelNotFoundError, ContextLengthError, ContentFilterError, StreamStalledError,
        StreamCutError, MalformedStreamError, StreamErrorEvent, EmptyOutputError,
        TruncatedOutputError, InvalidOutputError, MalformedToolCallError, OversizedOutputError,
        LocalSaturationError,
    )
}  # fmt: skip
