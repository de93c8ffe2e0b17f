"""Every adapter against the simulator on a real socket, for every fault the simulator injects.

Eight routes (Anthropic, OpenAI, an OpenAI-compatible server, Gemini, and the clouds:
Bedrock Converse with its binary event stream, Claude and Gemini on Vertex AI, an Azure
OpenAI deployment) times every :class:`~sim.faults.FaultKind`, streaming and not where
the fault applies. Each call must
end in the exact typed error with the expected decision (or in a good reply for faults
that must not fail it), and the simulator's attempts log must show exactly one attempt
carrying the fault: adapters never retry. Budgets are small so the slow faults (hang,
stall, slow first token) cost well under a second each.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agent_failover.providers.classify import DEFAULT_QUOTA_COOLDOWN_S
from agent_failover.providers.client import Budgets, build_http_client
from agent_failover.providers.registry import complete
from agent_failover.providers.validate import validate_reply
from agent_failover.resilience import errors as E
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.errors import Decision
from agent_failover.resilience.models import ChatReply, ChatRequest, Message
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.faults import Fault, FaultKind
from agent_failover.testing.sim.server import RunningSimulator, start_simulator

#: Route id → (simulator endpoint, EndpointConfig overrides).
ROUTES: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic-us-east": ("anthropic-us-east", {}),
    "openai-us": ("openai-us", {}),
    "cheap-mini": ("cheap-mini", {}),
    "gemini-flash": ("gemini-flash", {}),
    "bedrock-us-west-2": ("bedrock-us-west-2", {}),
    "vertex-europe-west1": ("vertex-europe-west1", {}),
    "vertex-gemini": (
        "vertex-europe-west1",
        {"name": "vertex-gemini", "provider": "gemini", "model": "gemini-2.5-flash"},
    ),
    "azure-swedencentral": ("azure-swedencentral", {}),
}
ENDPOINTS = list(ROUTES)
BUDGETS = Budgets(connect_s=1.0, ttft_s=0.5, idle_s=0.3, total_s=3.0, trailer_grace_s=0.05)
# Scheduling slack on top of a budget before a deadline counts as missed.
SLACK_S = 0.25
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["answer", "n"],
}
STREAM, JSON = True, False


@dataclass(frozen=True)
class Case:
    """One fault, the modes it applies to, and what the adapter must make of it."""

    fault: dict[str, Any]
    modes: tuple[bool, ...] = (STREAM, JSON)
    error: type[E.ProviderError] | None = None  # None: the call must succeed
    decision: Decision | None = None
    retryable: bool | None = None
    retry_after: float | None = None
    schema: bool = False  # ask for structured output (and validate the reply)
    budgets: Budgets = BUDGETS
    check: Callable[..., None] | None = None  # extra checks on (outcome, elapsed_s, stream)

    @property
    def label(self) -> str:
        """The label the simulator records for this fault."""
        return Fault.model_validate(self.fault).label


def slower_than(seconds: float) -> Callable[..., None]:
    """The reply took at least ``seconds`` (and, streamed, its first token did too)."""

    def check(reply: ChatReply, elapsed: float, stream: bool) -> None:
        assert reply.latency_ms >= seconds * 1000
        if stream:
            assert reply.ttft_ms is not None and reply.ttft_ms >= seconds * 1000

    return check


def paced_at(rate: float) -> Callable[..., None]:
    """The reply was generated no faster than ``rate`` tokens per second."""

    def check(reply: ChatReply, elapsed: float, stream: bool) -> None:
        tokens = reply.usage.output_tokens
        assert tokens > 1
        assert reply.latency_ms >= 0.9 * 1000 * (tokens - 1) / rate

    return check


def one_skipped(reply: ChatReply, elapsed: float, stream: bool) -> None:
    """Exactly the one injected malformed event was skipped, and the reply is complete."""
    assert reply.malformed_events_skipped == 1
    assert reply.text.endswith("[end]")


def prompt_without_done(reply: ChatReply, elapsed: float, stream: bool) -> None:
    """The reply came at the finish event, not after the held-open connection."""
    assert elapsed < BUDGETS.idle_s
    assert reply.text.endswith("[end]")


def cut_after_tokens(n: int) -> Callable[..., None]:
    """A streamed cut keeps exactly the ``n`` pieces (4 characters each) that arrived."""

    def check(err: E.ProviderError, elapsed: float, stream: bool) -> None:
        if stream:
            assert err.partial_text.startswith("[echo:") and len(err.partial_text) == 4 * n
        else:
            assert err.partial_text == ""

    return check


def stalled_with_partial(err: E.ProviderError, elapsed: float, stream: bool) -> None:
    """The stall is detected at the idle budget with the text so far kept."""
    assert err.partial_text.startswith("[echo:") and len(err.partial_text) == 4 * 5
    assert elapsed < BUDGETS.idle_s + SLACK_S + 0.1


def within(budget_s: float) -> Callable[..., None]:
    """The error came at ``budget_s``, not before it and not much after it."""

    def check(err: E.ProviderError, elapsed: float, stream: bool) -> None:
        assert budget_s * 0.9 <= elapsed < budget_s + SLACK_S

    return check


FAILOVER, COOLDOWN, RETRY, STOP = (
    Decision.FAILOVER,
    Decision.COOLDOWN,
    Decision.RETRY,
    Decision.STOP,
)

CASES: dict[str, Case] = {
    # latency family: slower, still successful (slow_first_token beyond ttft fails)
    "latency": Case({"kind": "latency", "seconds": 0.1}, check=slower_than(0.1)),
    "lognormal_latency": Case(
        {"kind": "lognormal_latency", "median_s": 0.08, "sigma": 0.0}, check=slower_than(0.08)
    ),
    "slow_first_token_within_budget": Case(
        {"kind": "slow_first_token", "seconds": 0.1}, check=slower_than(0.1)
    ),
    "slow_first_token": Case(
        {"kind": "slow_first_token", "seconds": 2.0},
        modes=(STREAM,),
        error=E.SlowFirstTokenError,
        decision=FAILOVER,
        retryable=True,
        check=within(BUDGETS.ttft_s),
    ),
    "tokens_per_sec": Case({"kind": "tokens_per_sec", "rate": 800}, check=paced_at(800)),
    # terminal family: one typed error per status, reset or hang
    "rate_limit_retry_after": Case(
        {"kind": "rate_limit", "retry_after": 2},
        error=E.RateLimitedError,
        decision=COOLDOWN,
        retryable=True,
        retry_after=2.0,
    ),
    "rate_limit": Case(
        {"kind": "rate_limit"}, error=E.RateLimitedError, decision=COOLDOWN, retryable=True
    ),
    "quota_exhausted": Case(
        {"kind": "quota_exhausted"},
        error=E.QuotaExhaustedError,
        decision=COOLDOWN,
        retryable=False,
        retry_after=DEFAULT_QUOTA_COOLDOWN_S,
    ),
    "server_error": Case(
        {"kind": "server_error"}, error=E.ServerError, decision=RETRY, retryable=True
    ),
    "unavailable": Case(
        {"kind": "unavailable"}, error=E.OverloadedError, decision=COOLDOWN, retryable=True
    ),
    "overloaded": Case(
        {"kind": "overloaded"}, error=E.OverloadedError, decision=COOLDOWN, retryable=True
    ),
    "http_error_502": Case(
        {"kind": "http_error", "status": 502}, error=E.ServerError, decision=RETRY, retryable=True
    ),
    "http_error_400": Case(
        {"kind": "http_error", "status": 400},
        error=E.InvalidRequestError,
        decision=STOP,
        retryable=False,
    ),
    "auth_error": Case(
        {"kind": "auth_error"}, error=E.AuthError, decision=COOLDOWN, retryable=False
    ),
    "connection_reset": Case(
        {"kind": "connection_reset"}, error=E.ConnectError, decision=FAILOVER, retryable=True
    ),
    "hang_stream": Case(
        {"kind": "hang", "seconds": 5.0},
        modes=(STREAM,),
        error=E.NoResponseError,
        decision=FAILOVER,
        retryable=True,
        check=within(BUDGETS.ttft_s),
    ),
    "hang_json": Case(
        {"kind": "hang", "seconds": 5.0},
        modes=(JSON,),
        error=E.NoResponseError,
        decision=FAILOVER,
        retryable=True,
        budgets=BUDGETS.model_copy(update={"total_s": 0.3}),
        check=within(0.3),
    ),
    "context_length": Case(
        {"kind": "context_length"}, error=E.ContextLengthError, decision=FAILOVER, retryable=False
    ),
    "content_filter_error": Case(
        {"kind": "content_filter", "mode": "error"},
        error=E.ContentFilterError,
        decision=FAILOVER,
        retryable=False,
    ),
    "content_filter_finish": Case(
        {"kind": "content_filter", "mode": "finish"},
        error=E.ContentFilterError,
        decision=FAILOVER,
        retryable=False,
    ),
    # stream family (stream_cut also truncates a non-streamed body)
    "stream_cut": Case(
        {"kind": "stream_cut", "after_tokens": 5},
        error=E.StreamCutError,
        decision=FAILOVER,
        retryable=True,
        check=cut_after_tokens(5),
    ),
    "stream_stall": Case(
        {"kind": "stream_stall", "seconds": 2.0, "after_tokens": 5},
        modes=(STREAM,),
        error=E.StreamStalledError,
        decision=FAILOVER,
        retryable=True,
        check=stalled_with_partial,
    ),
    "malformed_chunk": Case(
        {"kind": "malformed_chunk", "after_tokens": 3}, modes=(STREAM,), check=one_skipped
    ),
    "no_done": Case(
        {"kind": "no_done", "seconds": 2.0}, modes=(STREAM,), check=prompt_without_done
    ),
    "stream_error_event_overloaded": Case(
        {"kind": "stream_error_event", "after_tokens": 3, "error_type": "overloaded"},
        modes=(STREAM,),
        error=E.StreamErrorEvent,
        decision=COOLDOWN,
        retryable=True,
    ),
    "stream_error_event_server_error": Case(
        {"kind": "stream_error_event", "after_tokens": 3, "error_type": "server_error"},
        modes=(STREAM,),
        error=E.StreamErrorEvent,
        decision=FAILOVER,
        retryable=True,
    ),
    # output family: a good exchange, an unusable answer (found by validate_reply)
    "invalid_json": Case(
        {"kind": "invalid_json"},
        error=E.InvalidOutputError,
        decision=FAILOVER,
        retryable=True,
        schema=True,
    ),
    "schema_violation": Case(
        {"kind": "schema_violation"},
        error=E.InvalidOutputError,
        decision=FAILOVER,
        retryable=True,
        schema=True,
    ),
    "empty_output": Case(
        {"kind": "empty_output"}, error=E.EmptyOutputError, decision=FAILOVER, retryable=True
    ),
    # A runaway reply (max_tokens ignored): streamed, the first 16 KiB piece is already past
    # the limit and the stream is abandoned; a JSON body is checked once read.
    "oversized_output": Case(
        {"kind": "oversized_output", "size_bytes": 10_000},
        error=E.OversizedOutputError,
        decision=FAILOVER,
        retryable=False,
        budgets=BUDGETS.model_copy(update={"max_reply_bytes": 8192}),
    ),
}

PARAMS = [
    pytest.param(endpoint, name, stream, id=f"{endpoint}-{name}-{'stream' if stream else 'json'}")
    for name, case in CASES.items()
    for stream in case.modes
    for endpoint in ENDPOINTS
]


@pytest.fixture(scope="session")
async def simulator() -> AsyncIterator[RunningSimulator]:
    """One wall-clock simulator on a free loopback port for the whole session."""
    server = await start_simulator()
    yield server
    await server.stop()


def route_config(simulator: RunningSimulator, route: str) -> EndpointConfig:
    """The EndpointConfig of a route id (a simulated endpoint, maybe re-addressed)."""
    sim_name, overrides = ROUTES[route]
    return simulator.endpoint_config(sim_name, **overrides)


@pytest.fixture(scope="session")
async def sim_client(simulator: RunningSimulator) -> AsyncIterator[httpx.AsyncClient]:
    """The shared adapter client (pools and slots per endpoint), as a worker holds one."""
    configs = [route_config(simulator, e) for e in ENDPOINTS]
    async with build_http_client(configs) as client:
        yield client


@pytest.fixture(scope="session")
async def _admin(simulator: RunningSimulator) -> AsyncIterator[SimAdmin]:
    """One admin client for the session (building a client per test costs ~20 ms)."""
    async with simulator.admin() as client:
        yield client


@pytest.fixture
async def admin(_admin: SimAdmin) -> SimAdmin:
    """The simulator's admin client, with faults, attempts log and RNG reset."""
    await _admin.reset()
    return _admin


def request_for(case: Case, stream: bool) -> ChatRequest:
    """A small request, structured when the case needs a schema."""
    return ChatRequest(
        messages=[Message(role="user", content="Summarise the incident report")],
        max_tokens=256,
        stream=stream,
        json_schema=SCHEMA if case.schema else None,
    )


def test_every_fault_kind_is_covered():
    """The table exercises every fault kind the simulator can inject."""
    covered = {FaultKind(c.fault["kind"]) for c in CASES.values()}
    assert covered == set(FaultKind)


@pytest.mark.parametrize(("endpoint", "name", "stream"), PARAMS)
async def test_fault(simulator, sim_client, admin, endpoint, name, stream):
    """One fault on one adapter: the exact typed error or a good reply, from one attempt."""
    case = CASES[name]
    sim_name = ROUTES[endpoint][0]
    await admin.set_faults(sim_name, [case.fault])
    ep = route_config(simulator, endpoint)
    request = request_for(case, stream)
    outcome: ChatReply | E.ProviderError
    started = time.monotonic()
    try:
        reply = await complete(sim_client, ep, request, case.budgets)
        validate_reply(reply, request.json_schema, endpoint=endpoint)
        outcome = reply
    except E.ProviderError as err:
        outcome = err
    elapsed = time.monotonic() - started

    if case.error is None:
        assert isinstance(outcome, ChatReply), f"expected a reply, got {outcome!r}"
        assert outcome.endpoint == endpoint and outcome.text
    else:
        assert type(outcome) is case.error, f"expected {case.error.__name__}, got {outcome!r}"
        assert outcome.endpoint == endpoint
        assert outcome.decision is case.decision
        assert outcome.retryable is case.retryable
        if case.retry_after is not None or case.error is E.RateLimitedError:
            assert outcome.retry_after == case.retry_after
    if case.check is not None:
        case.check(outcome, elapsed, stream)

    attempts = await admin.attempts()
    assert len(attempts) == 1, [a.model_dump() for a in attempts]
    assert attempts[0].endpoint == sim_name
    assert attempts[0].stream is stream
    assert attempts[0].faults == [case.label]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_a_finished_stream_leaves_its_connection_reusable(simulator, admin, endpoint):
    """Streamed calls one after another share one connection: the body's end is read
    after the last event, so the response does not close its connection."""
    transport = httpx.AsyncHTTPTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        ep = route_config(simulator, endpoint)
        for _ in range(3):
            reply = await complete(client, ep, request_for(Case({}), STREAM), BUDGETS)
            assert reply.text
        # httpcore's pool (no public counter): one kept-alive connection, not three opened.
        assert len(transport._pool.connections) == 1
