"""Our own connection slots running out is not the route's fault: a burst to a healthy
but slow primary fails the overflow as ``local_saturation`` and leaves its breaker closed."""

from __future__ import annotations

import asyncio

from temporalio.exceptions import ApplicationError

from agent_failover.activities.failures import failed_outcome
from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import CallModelInput
from agent_failover.providers.client import build_http_client
from agent_failover.resilience.config import BreakerSettings, PolicyConfig
from agent_failover.resilience.contracts import BreakerState
from agent_failover.resilience.errors import Decision, ErrorClass, LocalSaturationError
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.testing.sim.admin import SimAdmin

PRIMARY = "anthropic-us-east"
ROLE = "analyst"
BURST = 60
#: The simulator holds every answer this long: longer than the connect budget below, so
#: calls queued behind the endpoint's slots give up while the first ones are still served.
LATENCY_S = 0.6
CONNECT_S = 0.2
T0 = 1_700_000_000.0


def _call(i: int) -> CallModelInput:
    return CallModelInput(
        role=ROLE,
        route=PRIMARY,
        request=ChatRequest(messages=[Message(role="user", content=f"burst {i}")]),
        ttft_budget_ms=5000,
        idle_budget_ms=5000,
        timeout_ms=10_000,
        now=T0 + i * 0.001,
    )


async def test_a_burst_to_a_slow_healthy_primary_leaves_its_breaker_closed(
    policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """60 concurrent calls to the simulator's primary, slowed to 0.6 s, through a worker's
    real client (20 connection slots per endpoint and bulkhead): those past the slots fail
    over as local_saturation and the primary's breaker stays closed with no failure counted."""
    await sim_admin.set_faults(PRIMARY, [{"kind": "latency", "seconds": LATENCY_S}])
    endpoint = policy.endpoint(PRIMARY)
    http = build_http_client(policy.endpoints.values())
    health = MemoryHealthStore()
    acts = LLMActivitySet(
        policy,
        http,
        health,
        MemoryResponseCache(),
        task_queue_for=lambda r: "q",
        connect_timeout_s=CONNECT_S,
    )
    async with http:
        results = await asyncio.wait_for(
            asyncio.gather(
                *(acts.calls.call_model(_call(i)) for i in range(BURST)), return_exceptions=True
            ),
            timeout=20,
        )
    answered = [r for r in results if not isinstance(r, BaseException)]
    failed = [r for r in results if isinstance(r, BaseException)]
    assert len(answered) == endpoint.max_connections < BURST
    assert failed and all(isinstance(e, ApplicationError) for e in failed)
    assert {e.type for e in failed} == {ErrorClass.LOCAL_SATURATION.value}
    # The workflow moves on to the next route rather than retrying this one.
    assert all(e.non_retryable for e in failed)
    assert {e.details[0]["decision"] for e in failed} == {Decision.FAILOVER.value}
    breaker = await health.breaker(PRIMARY)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.consecutive_failures == breaker.consecutive_timeouts == 0
    snap = await health.snapshot([PRIMARY], now=T0 + 1, window_s=60, min_calls=1)
    stats = snap.get(PRIMARY).stats
    assert stats.error_rate == 0
    assert stats.local_saturations == len(failed)


async def test_the_store_ignores_local_saturation() -> None:
    """Ten local_saturation outcomes in a row, with both in-a-row rules at 2: no failure or
    timeout counted, nothing in the windows, the breaker closed."""
    settings = BreakerSettings(consecutive_failures=2, consecutive_timeouts=2)
    health = MemoryHealthStore()
    err = LocalSaturationError("all slots busy", endpoint=PRIMARY, bulkhead="specialists")
    outcome = failed_outcome(PRIMARY, err, T0, 200.0, trial=False)
    assert outcome.counts_against_route is False
    assert outcome.error_class is ErrorClass.LOCAL_SATURATION
    for i in range(10):
        await health.record(outcome.model_copy(update={"at": T0 + i}), settings)
    breaker = await health.breaker(PRIMARY)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.consecutive_failures == breaker.consecutive_timeouts == 0
    snap = await health.snapshot([PRIMARY], now=T0 + 10, window_s=60, min_calls=1)
    assert snap.get(PRIMARY).stats.calls == snap.get(PRIMARY).stats.errors == 0
    assert snap.get(PRIMARY).stats.local_saturations == 10
