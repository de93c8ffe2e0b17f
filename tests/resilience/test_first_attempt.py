"""Which first attempts an activity may run at once (plain ones), and the request it sends:
planned as the workflow plans a call's first round, prompted as the workflow prompts."""

from __future__ import annotations

import pytest

from agent_failover.config.loader import load_policy
from agent_failover.resilience.contracts import HealthSnapshot, ReasonCode, RouteHealth
from agent_failover.resilience.cooldown_wait import plan_waiting_out
from agent_failover.resilience.estimate import estimate_request_tokens
from agent_failover.resilience.first_attempt import (
    caches_answer,
    output_schema_for,
    plain_first,
    plain_start,
    plans_hedge,
    prompted,
    role_request,
    round_facts,
)
from agent_failover.resilience.limits import MAX_REQUEST_BYTES
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.outcomes import CallState
from agent_failover.resilience.prompts import CALLER_VARIANT, StructuredPath
from agent_failover.resilience.triage import minimal_input_tokens
from tests.resilience.conftest import DEMO_POLICY

NOW = 1_000_000.0
POLICY = load_policy(DEMO_POLICY, env={})
PRIMARY = "anthropic-us-east"
CRITIC = POLICY.role("critic")  # no hedging, an output schema
PLANNER = POLICY.role("planner")
REQUEST = ChatRequest(messages=[Message(role="user", content="review this")], max_tokens=200)
EMPTY = HealthSnapshot(taken_at=NOW)


def _plan(role, snapshot: HealthSnapshot, request: ChatRequest, ticket: float = 0.5):
    """The workflow's first round for ``request``, planned the way the loop plans it."""
    request = role_request(request, role)
    facts = round_facts(
        CallState(),
        request,
        input_tokens=estimate_request_tokens(request),
        floor=minimal_input_tokens(request),
        ticket=ticket,
        elapsed_ms=0.0,
    )
    return plan_waiting_out(role, POLICY, snapshot, facts, NOW)


def test_a_healthy_first_attempt_is_the_workflows_first_round_prompted_for_its_route() -> None:
    """The attempt is the plan's first; the request carries the role's system prompt (its
    variant for the route) and the schema the route takes natively; the answer is cached."""
    first = plain_first(CRITIC, POLICY, EMPTY, REQUEST, ticket=0.5, now=NOW)
    assert first is not None
    assert first.attempt == _plan(CRITIC, EMPTY, REQUEST).attempts[0]
    assert first.attempt.route == PRIMARY and first.attempt.tier == 0
    ep = POLICY.endpoints[PRIMARY]
    sent, choice, path = prompted(role_request(REQUEST, CRITIC), CRITIC, ep, False)
    assert first.request == sent and first.variant == choice.variant
    assert CRITIC.system_prompt in (first.request.system or "")
    assert path is StructuredPath.NATIVE and first.request.json_schema == CRITIC.output_schema
    assert first.output_schema == CRITIC.output_schema
    assert first.cache is CRITIC.roster.cache.enabled


def test_a_callers_own_system_prompt_is_kept() -> None:
    own = REQUEST.model_copy(update={"system": "mine"})
    first = plain_first(CRITIC, POLICY, EMPTY, own, ticket=0.5, now=NOW)
    assert first is not None and first.variant == CALLER_VARIANT
    assert first.request.system == "mine"


def test_a_first_attempt_that_waits_out_a_retry_after_is_not_plain() -> None:
    """A short shared cool-down on the primary: the plan waits (a timer the workflow
    sets), so the activity leaves the attempt to the workflow."""
    short = POLICY.rate_limit.max_wait_ms / 1000 * 0.5
    snap = HealthSnapshot(
        taken_at=NOW, routes={PRIMARY: RouteHealth(route=PRIMARY, cooldown_until=NOW + short)}
    )
    assert _plan(CRITIC, snap, REQUEST).attempts[0].wait_ms > 0
    assert plain_first(CRITIC, POLICY, snap, REQUEST, ticket=0.5, now=NOW) is None


def test_a_request_too_big_for_one_activity_input_is_not_plain() -> None:
    """Cut to fit (triage records the cut) or not fitting at all: the workflow's case."""
    big = "word " * (MAX_REQUEST_BYTES // 4)
    request = ChatRequest(
        messages=[
            Message(role="user", content=big),
            Message(role="assistant", content="ok"),
            Message(role="user", content="and now?"),
        ]
    )
    assert plain_first(CRITIC, POLICY, EMPTY, request, ticket=0.5, now=NOW) is None


@pytest.mark.parametrize(
    ("update", "second_hedge", "max_hedges", "plain"),
    [
        ({}, False, 1, True),
        ({"wait_ms": 120.0}, False, 1, False),
        ({"floor": True}, False, 1, False),
        ({"needs_triage": True, "target_input_tokens": 100}, False, 1, False),
        ({}, True, 1, False),  # a hedge planned beside it
        ({}, True, 0, True),  # planned, but the role has no hedge to spend
    ],
    ids=["plain", "waits", "floor", "triage", "hedged", "no-hedge-budget"],
)
def test_plain_start_names_what_the_workflow_must_do_first(
    update: dict, second_hedge: bool, max_hedges: int, plain: bool
) -> None:
    p = _plan(CRITIC, EMPTY, REQUEST)
    assert len(p.attempts) > 1
    first = p.attempts[0].model_copy(update=update)
    second = p.attempts[1].model_copy(update={"hedge": second_hedge})
    p = p.model_copy(update={"attempts": [first, second, *p.attempts[2:]]})
    role = CRITIC.model_copy(
        update={"hedging": CRITIC.hedging.model_copy(update={"max_hedges": max_hedges})}
    )
    assert (plain_start(p, role) is first) is plain


def test_no_attempt_left_is_not_plain() -> None:
    p = _plan(CRITIC, EMPTY, REQUEST).model_copy(update={"attempts": []})
    assert plain_start(p, CRITIC) is None


def test_only_a_full_answer_is_cached() -> None:
    assert caches_answer(CRITIC, 0, []) is CRITIC.roster.cache.enabled
    assert not caches_answer(CRITIC, 2, [])
    assert not caches_answer(CRITIC, 0, [ReasonCode.CONTEXT_TRUNCATED])
    assert not caches_answer(CRITIC, 1, [ReasonCode.CONTEXT_SUMMARIZED])


def test_a_schema_only_in_the_prompt_validates_against_the_callers_when_the_role_has_none() -> None:
    theirs = {"type": "object"}
    assert output_schema_for(CRITIC, StructuredPath.PROMPT, theirs) == CRITIC.output_schema
    no_schema = CRITIC.model_copy(update={"output_schema": None})
    assert output_schema_for(no_schema, StructuredPath.PROMPT, theirs) == theirs
    assert output_schema_for(no_schema, StructuredPath.NATIVE, theirs) is None


def test_plans_hedge_is_the_planners_own_condition() -> None:
    """Stateless, hedging on, a hedge to spend: the role's plans can hedge; any one of the
    three off, never (and a call of such a role runs its first attempt in the workflow)."""
    analyst = POLICY.role("analyst")
    assert analyst.stateless and analyst.hedging.enabled and plans_hedge(analyst)
    hedging = analyst.hedging
    assert not plans_hedge(analyst.model_copy(update={"stateless": False}))
    off = hedging.model_copy(update={"enabled": False})
    assert not plans_hedge(analyst.model_copy(update={"hedging": off}))
    spent = hedging.model_copy(update={"max_hedges": 0})
    assert not plans_hedge(analyst.model_copy(update={"hedging": spent}))
    assert not plans_hedge(CRITIC)
