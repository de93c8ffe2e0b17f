"""The shadow_evaluate activity against the simulator on loopback: it grades against the
reference route, records samples and verdicts, uses a judge route when asked, and skips
when the reference is down."""

from __future__ import annotations

import time

from agent_failover.activities.shadow import ShadowActivities, ShadowInput
from agent_failover.providers.client import build_http_client
from agent_failover.resilience.config import PolicyConfig, ShadowSettings
from agent_failover.resilience.contracts import BreakerState
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.quality import ScorerSpec
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.testing.sim.admin import SimAdmin

PRIMARY, REFERENCE = "anthropic-us-east", "openai-us"


def _policy(policy: PolicyConfig, **shadow: object) -> PolicyConfig:
    settings = ShadowSettings(reference_route=REFERENCE, min_samples=2, **shadow)
    plain = policy.role("plain").model_copy(update={"shadow": settings})
    return policy.model_copy(update={"roles": {**policy.roles, "plain": plain}})


def _input(answer: str, token: str = "TOKEN-7") -> ShadowInput:
    return ShadowInput(
        role="plain",
        request=ChatRequest(
            messages=[Message(role="user", content=f"Reply with exactly: {token}")],
            max_tokens=20,
        ),
        answered_by=PRIMARY,
        answer=answer,
        targets=[PRIMARY],
        now=time.time(),
    )


async def _evaluate(policy: PolicyConfig, store: MemoryHealthStore, inp: ShadowInput):
    http = build_http_client(policy.endpoints.values())
    try:
        return await ShadowActivities(policy, http, store).shadow_evaluate(inp)
    finally:
        await http.aclose()


async def test_disagreeing_answers_regress_the_route(
    policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """Two wrong answers (reference always right) drop agreement to 0: regressed."""
    await sim_admin.set_accuracy(REFERENCE, 1.0)
    cfg, store = _policy(policy), MemoryHealthStore()
    first = await _evaluate(cfg, store, _input("wrong"))
    assert [s.score for s in first.samples] == [0.0] and not first.samples[0].regressed
    second = await _evaluate(cfg, store, _input("TOKEN-8 maybe", token="TOKEN-8"))
    assert second.samples[0].regressed and second.samples[0].changed
    state = await store.quality("plain", PRIMARY)
    assert state.regressed and len(state.samples) == 2
    agree = await _evaluate(cfg, store, _input("token-9.", token="TOKEN-9"))
    assert agree.samples[0].score == 1.0  # normalized: case and punctuation ignored


async def test_judge_route_grades_free_text(policy: PolicyConfig, sim_admin: SimAdmin) -> None:
    """With a judge scorer the verdict comes from the judge route (the simulator grades by
    comparing the quoted answers)."""
    for ep in (REFERENCE, "gemini-flash"):
        await sim_admin.set_accuracy(ep, 1.0)
    cfg = _policy(policy, scorer=ScorerSpec(kind="judge", judge_route="gemini-flash"))
    store = MemoryHealthStore()
    good = await _evaluate(cfg, store, _input("TOKEN-7"))
    bad = await _evaluate(cfg, store, _input("TOKEN-1"))
    assert good.samples[0].score == 1.0 and bad.samples[0].score == 0.0
    judged = [a for a in await sim_admin.attempts() if a["endpoint"] == "gemini-flash"]
    assert len(judged) == 2


async def test_reference_down_skips_without_a_sample(
    policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """An open reference breaker: nothing is asked, nothing recorded."""
    cfg, store = _policy(policy), MemoryHealthStore()
    await store.force(REFERENCE, BreakerState.FORCED_OPEN, time.time())
    out = await _evaluate(cfg, store, _input("anything"))
    assert out.skipped and "forced_open" in out.skipped and out.samples == []
    assert (await store.quality("plain", PRIMARY)).samples == []
    assert await sim_admin.attempts() == []
