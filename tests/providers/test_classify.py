"""Classification is total and exact: statuses, vendor hints, exceptions, stream endings."""

from __future__ import annotations

import inspect

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_failover.providers.classify import (
    DEFAULT_QUOTA_COOLDOWN_S,
    Phase,
    StreamEnd,
    classify_exception,
    classify_status,
    classify_stream_end,
    error_event_decision,
)
from agent_failover.providers.retry_after import MAX_RETRY_AFTER_S
from agent_failover.resilience import errors as E

NOW = 1_750_000_000.0


def status(code, body=None, headers=None):
    """classify_status with a fixed endpoint and clock."""
    return classify_status(code, body, headers, endpoint="ep", now=NOW)


def test_gemini_retry_delay_in_body():
    """A Gemini 429 with RetryInfo.retryDelay is a rate limit with that delay, not a quota wall."""
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "You exceeded your current quota, check billing details",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}],
        }
    }
    import json

    err = status(429, json.dumps(body))
    assert type(err) is E.RateLimitedError and err.retry_after == 37.0


def test_quota_has_long_default_cooldown():
    """An exhausted quota with no hint cools down for the default, and is non-retryable."""
    err = status(429, b'{"error": {"code": "insufficient_quota"}}')
    assert type(err) is E.QuotaExhaustedError
    assert err.retry_after == DEFAULT_QUOTA_COOLDOWN_S and not err.retryable
    assert err.decision is E.Decision.COOLDOWN


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (100, E.ServerError),
        (204, E.ServerError),
        (302, E.ServerError),
        (400, E.InvalidRequestError),
        (401, E.AuthError),
        (403, E.AuthError),
        (404, E.ModelNotFoundError),
        (408, E.ServerError),
        (409, E.ServerError),
        (413, E.ContextLengthError),
        (422, E.InvalidRequestError),
        (429, E.RateLimitedError),
        (500, E.ServerError),
        (502, E.ServerError),
        (503, E.OverloadedError),
        (504, E.ServerError),
        (529, E.OverloadedError),
        (599, E.ServerError),
    ],
)
def test_status_table(code, cls):
    """Each status with an uninformative body maps to its documented class."""
    assert type(status(code, b"")) is cls


def test_unexpected_status_fails_over():
    """A redirect or other non-error status fails over rather than retrying the same route."""
    assert status(301).decision is E.Decision.FAILOVER


def test_overloaded_body_on_500():
    """An Anthropic overloaded_error body on a 5xx is Overloaded."""
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    assert type(status(500, body)) is E.OverloadedError


# Real cloud error bodies, so the property test also walks the cloud-specific branches.
CLOUD_BODIES = [
    '{"message": "Too many requests, please wait before trying again."}',
    '{"__type": "com.amazon.coral.validate#ValidationException", "message": "Input is too long"}',
    '{"message": "Input is too long for requested model."}',
    '{"error": {"code": "content_filter", "innererror": {"code": "ResponsibleAIPolicyViolation"}}}',
    '{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [{"@type": '
    '"type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": '
    '"GenerateRequestsPerDayPerProjectPerModel"}]}]}}',
    '{"error": {"code": 403, "status": "PERMISSION_DENIED", "details": [{"reason": '
    '"BILLING_DISABLED"}]}}',
]
headers_st = st.dictionaries(
    st.sampled_from(
        [
            "retry-after",
            "Retry-After-Ms",
            "x-ratelimit-reset-tokens",
            "x-ratelimit-remaining-tokens",
            "anthropic-ratelimit-requests-reset",
            "anthropic-ratelimit-requests-remaining",
            "content-type",
            # the clouds' own error signals
            "x-amzn-ErrorType",
            "x-amzn-RequestId",
            "apim-request-id",
        ]
    )
    | st.text(max_size=10),
    st.text(max_size=40)
    | st.sampled_from(
        [
            "0",
            "-5",
            "1e400",
            "inf",
            "6m0s",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "2015-10-21T07:28:00Z",
            "ThrottlingException:http://internal.amazon.com/coral/",
            "ValidationException",
            "ServiceQuotaExceededException",
            "ModelNotReadyException",
            "#",
            ":",
            "",
        ]
    ),
    max_size=6,
)
bodies_st = (
    st.none()
    | st.binary(max_size=200)
    | st.text(max_size=200)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "error",
                        "type",
                        "code",
                        "message",
                        "details",
                        "status",
                        "retryDelay",
                        "__type",
                        "innererror",
                        "@type",
                        "violations",
                        "quotaId",
                        "reason",
                    ]
                ),
                inner,
                max_size=4,
            )
        ),
        max_leaves=10,
    ).map(lambda v: __import__("json").dumps(v))
    | st.sampled_from(CLOUD_BODIES)
)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(min_value=100, max_value=599),
    bodies_st,
    headers_st,
    st.none() | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12),
)
def test_classification_is_total(code, body, headers, now):
    """Any status 100-599 with any body/headers maps to exactly one class with a Decision."""
    err = classify_status(code, body, headers, endpoint="ep", now=now)
    assert type(err) is E.ERROR_TYPES[err.error_class]
    assert err.decision in E.Decision
    assert err.status == code
    assert err.retry_after is None or 0.0 <= err.retry_after <= max(
        MAX_RETRY_AFTER_S, DEFAULT_QUOTA_COOLDOWN_S
    )
    str(err), repr(err)


def _httpx_exception_types() -> list[type[BaseException]]:
    return [
        obj for _, obj in inspect.getmembers(httpx, inspect.isclass) if issubclass(obj, Exception)
    ]


HTTPX_EXCEPTIONS = _httpx_exception_types()


def _instance(cls: type[BaseException]) -> BaseException:
    if issubclass(cls, httpx.HTTPStatusError):
        req = httpx.Request("POST", "http://x")
        return cls("x", request=req, response=httpx.Response(503, request=req))
    try:
        return cls("boom")
    except TypeError:
        return cls()  # type: ignore[call-arg]


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("cls", HTTPX_EXCEPTIONS, ids=lambda c: c.__name__)
def test_every_httpx_exception_maps(cls, phase):
    """Every httpx exception type, in every phase, maps to exactly one ProviderError."""
    err = classify_exception(_instance(cls), endpoint="ep", phase=phase, partial_text="p")
    assert type(err) is E.ERROR_TYPES[err.error_class]


@pytest.mark.parametrize(
    ("exc", "phase", "cls"),
    [
        (httpx.ConnectError("x"), Phase.BEFORE_HEADERS, E.ConnectError),
        (httpx.RemoteProtocolError("x"), Phase.BEFORE_HEADERS, E.ConnectError),
        (httpx.ReadTimeout("x"), Phase.BEFORE_HEADERS, E.NoResponseError),
        (httpx.PoolTimeout("x"), Phase.BEFORE_HEADERS, E.LocalSaturationError),
        (httpx.ReadTimeout("x"), Phase.AWAITING_FIRST_TOKEN, E.SlowFirstTokenError),
        (httpx.ReadTimeout("x"), Phase.STREAMING, E.StreamStalledError),
        (httpx.RemoteProtocolError("x"), Phase.STREAMING, E.StreamCutError),
        (httpx.ReadError("x"), Phase.STREAMING, E.StreamCutError),
        (httpx.DecodingError("x"), Phase.STREAMING, E.MalformedStreamError),
        (TimeoutError(), Phase.BEFORE_HEADERS, E.NoResponseError),
        (OSError("x"), Phase.BEFORE_HEADERS, E.ConnectError),
        (RuntimeError("x"), Phase.STREAMING, E.StreamCutError),
    ],
)
def test_exception_table(exc, phase, cls):
    """Key exceptions map to the class the phase implies."""
    assert type(classify_exception(exc, endpoint="ep", phase=phase)) is cls


def test_provider_error_passes_through():
    """An already classified error is returned unchanged."""
    err = E.ServerError("x", endpoint="ep")
    assert classify_exception(err, endpoint="other") is err


@pytest.mark.parametrize("end", list(StreamEnd))
def test_every_stream_end_maps(end):
    """Every stream ending maps to one class, and only COMPLETE to none."""
    err = classify_stream_end(end, endpoint="ep", partial_text="so far")
    if end is StreamEnd.COMPLETE:
        assert err is None
    else:
        assert err is not None and type(err) is E.ERROR_TYPES[err.error_class]
        assert err.partial_text == "so far"


@pytest.mark.parametrize(
    ("error", "decision"),
    [
        ({"type": "overloaded_error"}, E.Decision.COOLDOWN),
        ({"code": 503, "status": "UNAVAILABLE"}, E.Decision.COOLDOWN),
        ({"type": "rate_limit_error"}, E.Decision.COOLDOWN),
        ({"type": "api_error"}, E.Decision.FAILOVER),
        ("something broke", E.Decision.FAILOVER),
    ],
)
def test_error_event_decisions(error, decision):
    """Overload / rate-limit error events cool the route down; others fail over."""
    assert error_event_decision(error) is decision


def test_anthropic_output_filter_400_is_content_filter() -> None:
    """Anthropic's 400 "Output blocked by content filtering policy" is a content filter."""
    from agent_failover.providers.classify import classify_status
    from agent_failover.resilience.errors import ContentFilterError

    body = (
        b'{"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"Output blocked by content filtering policy"}}'
    )
    err = classify_status(400, body, {}, endpoint="a", now=0.0)
    assert isinstance(err, ContentFilterError)


# -- the clouds' signals -----------------------------------------------------------------

AWS_TYPE = "x-amzn-ErrorType"


@pytest.mark.parametrize(
    ("code", "aws_type", "message", "cls"),
    [
        (429, "ThrottlingException", "Too many requests", E.RateLimitedError),
        (429, "ModelNotReadyException", "Model is not ready", E.OverloadedError),
        (503, "ServiceUnavailableException", "unable to process", E.OverloadedError),
        (400, "ServiceQuotaExceededException", "Too many tokens per day", E.QuotaExhaustedError),
        (400, "ValidationException", "Input is too long for the model.", E.ContextLengthError),
        (400, "ValidationException", "too many input tokens: 210000", E.ContextLengthError),
        (400, "ValidationException", "blocked by content filtering policy", E.ContentFilterError),
        (400, "ValidationException", "messages: field required", E.InvalidRequestError),
        (424, "ModelErrorException", "The model returned an error", E.ServerError),
        (408, "ModelTimeoutException", "timed out", E.ServerError),
        (500, "InternalServerException", "oops", E.ServerError),
        (403, "AccessDeniedException", "not enabled", E.AuthError),
        (403, "UnrecognizedClientException", "invalid token", E.AuthError),
        (404, "ResourceNotFoundException", "no such model", E.ModelNotFoundError),
    ],
)  # fmt: skip
def test_bedrock_error_types(code, aws_type, message, cls):
    """Bedrock's x-amzn-ErrorType decides the class before the status does."""
    headers = {AWS_TYPE: f"{aws_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    err = status(code, f'{{"message": "{message}"}}', headers)
    assert type(err) is cls and err.status == code


def test_bedrock_error_type_in_body_and_retry_hints():
    """``__type`` in the body counts too; throttling keeps a Retry-After; quota cools long."""
    body = '{"__type": "com.amazon.bedrock#ThrottlingException", "message": "slow"}'
    err = status(429, body, {"retry-after": "4"})
    assert type(err) is E.RateLimitedError and err.retry_after == 4.0
    quota = status(400, "{}", {AWS_TYPE: "ServiceQuotaExceededException"})
    assert quota.retry_after == DEFAULT_QUOTA_COOLDOWN_S and not quota.retryable


def test_azure_signals():
    """Azure's 429 with retry-after-ms, and its content filter 400 with an innererror code."""
    rl = status(429, '{"error": {"code": "429", "message": "Please retry after 6 seconds."}}',
                {"retry-after-ms": "6000", "retry-after": "6"})  # fmt: skip
    assert type(rl) is E.RateLimitedError and rl.retry_after == 6.0
    body = {
        "error": {
            "code": "content_filter",
            "message": "The response was filtered",
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    }
    import json

    assert type(status(400, json.dumps(body))) is E.ContentFilterError


def test_vertex_per_minute_is_a_rate_limit_but_per_day_is_a_quota():
    """RESOURCE_EXHAUSTED per minute rate-limits; a per-day QuotaFailure exhausts the quota."""
    import json

    def body(quota_id: str) -> str:
        return json.dumps(
            {
                "error": {
                    "code": 429,
                    "status": "RESOURCE_EXHAUSTED",
                    "message": "Quota exceeded for aiplatform.googleapis.com",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                            "violations": [{"quotaId": quota_id}],
                        }
                    ],
                }
            }
        )

    assert type(status(429, body("GenerateContentRequestsPerMinutePerProject"))) is (
        E.RateLimitedError
    )
    daily = status(429, body("GenerateRequestsPerDayPerProjectPerModel"))
    assert type(daily) is E.QuotaExhaustedError and daily.retry_after == DEFAULT_QUOTA_COOLDOWN_S
    billing = status(403, '{"error": {"code": 403, "status": "PERMISSION_DENIED", '
                     '"details": [{"reason": "BILLING_DISABLED"}]}}')  # fmt: skip
    assert type(billing) is E.QuotaExhaustedError


@pytest.mark.parametrize(
    ("error", "decision"),
    [
        ({"type": "throttlingException"}, E.Decision.COOLDOWN),
        ({"type": "serviceUnavailableException"}, E.Decision.COOLDOWN),
        ({"type": "modelStreamErrorException"}, E.Decision.FAILOVER),
        ({"type": "internalServerException"}, E.Decision.FAILOVER),
    ],
)
def test_bedrock_stream_exception_decisions(error, decision):
    """Throttling and unavailability inside a stream cool the route down; others fail over."""
    assert error_event_decision(error) is decision


# --- context windows stated by the provider ------------------------------------------------


@pytest.mark.parametrize(
    ("body", "window", "prompt"),
    [
        (  # OpenAI (and vLLM / DeepSeek, which copy its wording)
            b'{"error":{"message":"This model\'s maximum context length is 128000 tokens. '
            b"However, your messages resulted in 150312 tokens. Please reduce the length of "
            b'the messages.","type":"invalid_request_error","code":"context_length_exceeded"}}',
            128_000,
            150_312,
        ),
        (  # Anthropic, prompt alone too long
            b'{"type":"error","error":{"type":"invalid_request_error",'
            b'"message":"prompt is too long: 210034 tokens > 200000 maximum"}}',
            200_000,
            210_034,
        ),
        (  # Anthropic, prompt + max_tokens over the window
            b'{"type":"error","error":{"type":"invalid_request_error","message":"input length '
            b"and `max_tokens` exceed context limit: 197779 + 8192 > 200000, decrease input "
            b'length or `max_tokens` and try again"}}',
            200_000,
            197_779,
        ),
        (  # Gemini
            b'{"error":{"code":400,"message":"The input token count (1200000) exceeds the '
            b'maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}',
            1_048_576,
            1_200_000,
        ),
        (  # Mistral
            b'{"object":"error","message":"Prompt contains 40000 tokens and 0 draft tokens, '
            b'too large for model with 32768 maximum context length","type":"invalid_request"}',
            32_768,
            40_000,
        ),
        (  # vLLM with a completion share
            b'{"error":{"message":"This model\'s maximum context length is 4096 tokens. However, '
            b'you requested 5000 tokens (4000 in the messages, 1000 in the completion)."}}',
            4_096,
            4_000,
        ),
    ],
)
def test_context_length_carries_the_stated_window(body: bytes, window: int, prompt: int) -> None:
    """Each provider's wording yields a ContextLengthError with the window it states."""
    err = status(400, body)
    assert type(err) is E.ContextLengthError
    assert (err.context_window, err.prompt_tokens) == (window, prompt)
    assert err.decision is E.Decision.FAILOVER and not err.classification.counts_against_route


def test_context_length_without_a_number_has_no_window() -> None:
    """A rejection that names no limit is still a context-length error, window unknown."""
    err = status(413, b"request too large")
    assert type(err) is E.ContextLengthError and err.context_window is None


def test_implausible_stated_window_is_ignored() -> None:
    """A number no model window could be (here 12) is a misreading, not a limit."""
    err = status(400, b'{"error":{"message":"maximum context length is 12 tokens"}}')
    assert type(err) is E.ContextLengthError and err.context_window is None


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_parse_context_limit_is_total(text: str) -> None:
    """Never raises; a window it reports is in the plausible range."""
    from agent_failover.providers.vendor_hints import parse_context_limit

    window, _ = parse_context_limit(text)
    assert window is None or 256 <= window <= 100_000_000


def test_rate_limit_is_a_cooldown_that_never_feeds_the_breaker() -> None:
    """A 429 cools the route down; it is not evidence against the route's health."""
    err = status(429, b"slow down", {"retry-after": "1"})
    assert err.decision is E.Decision.COOLDOWN and err.retry_after == 1.0
    assert not err.classification.counts_against_route
