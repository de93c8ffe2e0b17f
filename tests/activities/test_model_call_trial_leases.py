"""``call_model`` on a half-open route: its trial slot is leased for the attempt's timeout
plus the grace, its outcome gives back exactly that lease, and a call refused because
every slot is held says ``trial_slots_full`` and when the first lease lapses."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from temporalio.exceptions import ApplicationError

from agent_failover.activities.llm import LLMActivitySet
from agent_failover.activities.models import CallModelInput
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import BreakerSettings
from agent_failover.resilience.contracts import BreakerState, CallOutcome
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.outcomes import BREAKER_REJECTED
from agent_failover.stores.cache import MemoryResponseCache
from agent_failover.stores.memory_health import MemoryHealthStore
from tests.providers.wire import OPENAI

T0 = 1_700_000_000.0
ROUTE = "openai-us"
ROLE = "analyst"
TIMEOUT_MS = 5000


def _reply(_: httpx.Request) -> httpx.Response:
    blocks = OPENAI.ok_stream(["ok"])

    async def body() -> AsyncIterator[bytes]:
        for b in blocks:
            yield b

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


@pytest.fixture
async def half_open() -> AsyncIterator[tuple[LLMActivitySet, MemoryHealthStore, BreakerSettings]]:
    """A worker whose store holds ROUTE's breaker open past its open duration, and the
    route's breaker settings."""
    policy = load_policy(DEFAULT_POLICY_PATH, env={})
    store = MemoryHealthStore()
    settings = policy.trial_settings(ROUTE, ROLE)
    auth = CallOutcome(route=ROUTE, at=T0 - 600, ok=False, error_class=ErrorClass.AUTH)
    await store.record(auth, settings)
    http = httpx.AsyncClient(transport=httpx.MockTransport(_reply))
    try:
        worker = LLMActivitySet(
            policy, http, store, MemoryResponseCache(), task_queue_for=lambda r: "q"
        )
        yield worker, store, settings
    finally:
        await http.aclose()


def _call(now: float) -> CallModelInput:
    return CallModelInput(
        role=ROLE,
        route=ROUTE,
        request=ChatRequest(messages=[Message(role="user", content="hi")], max_tokens=50),
        ttft_budget_ms=2000,
        idle_budget_ms=2000,
        timeout_ms=TIMEOUT_MS,
        now=now,
    )


async def _hold_slots(store: MemoryHealthStore, n: int, settings) -> list[str]:
    leases = []
    for _ in range(n):
        adm = await store.admit(ROUTE, settings, T0, hold_s=60.0)
        assert adm.permitted and adm.trial and adm.lease
        leases.append(adm.lease)
    return leases


async def test_a_trial_gives_back_its_own_lease(half_open) -> None:
    """A trial call takes a lease for its timeout plus the grace and its good outcome
    gives back that lease only (the other holders' stay)."""
    worker, store, settings = half_open
    others = await _hold_slots(store, settings.half_open_max_trials - 1, settings)
    result = await worker.calls.call_model(_call(T0 + 1))
    assert result.trial and result.reply.text == "ok"
    b = await store.breaker(ROUTE)
    assert b.state is BreakerState.HALF_OPEN and b.consecutive_good == 1
    assert [lease.id for lease in b.trial_leases] == others


async def test_every_slot_held_is_refused_as_trial_slots_full(half_open) -> None:
    """With every slot held the call never leaves: refused, naming trial_slots_full and
    when the first lease lapses (not the breaker's last move, open_duration_elapsed)."""
    worker, store, settings = half_open
    await _hold_slots(store, settings.half_open_max_trials, settings)
    with pytest.raises(ApplicationError) as info:
        await worker.calls.call_model(_call(T0 + 1))
    err = info.value
    assert err.type == BREAKER_REJECTED and err.non_retryable
    said = re.search(r"trial_slots_full: .* first lease lapses in ([0-9.]+)s", str(err))
    assert said is not None, str(err)
    lapse = 60.0 + settings.trial_lease_grace_s - 1  # taken at T0, refused at T0 + 1
    assert lapse - 0.5 <= float(said.group(1)) <= lapse
    # The attempt record keeps both (workflows/attempts.py reads the details).
    assert err.details[0]["breaker_reason"] == "trial_slots_full"
    assert lapse - 0.5 <= err.details[0]["retry_after_s"] <= lapse
    assert "open_duration_elapsed" not in str(err)
