"""Summarization before truncation (pure half) and pinned checkpoints in triage."""

from __future__ import annotations

from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import BreakerState, HealthSnapshot, RouteHealth
from agent_failover.resilience.models import ChatRequest, Message, Priority
from agent_failover.resilience.summarize import (
    SUMMARY_HEADER,
    plan_summary,
    summary_route,
    with_summary,
)
from agent_failover.resilience.tokens import estimate_tokens
from agent_failover.resilience.triage import minimal_request, triage

TASK = "Task: migrate the billing service to the new queue without downtime."


def _long_request() -> ChatRequest:
    msgs = [Message(role="user", content=TASK, priority=Priority.SUPPORTING, pinned=True)]
    for i in range(8):
        msgs.append(Message(role="assistant", content=f"step {i} " + "detail " * 200))
        msgs.append(Message(role="user", content=f"ok {i} " + "more " * 200))
    msgs.append(Message(role="user", content="What is the next step?"))
    return ChatRequest(messages=msgs, max_tokens=100)


def test_pinned_message_survives_every_cut() -> None:
    """Triage to the floor and byte-bounding both keep a pinned checkpoint verbatim."""
    req = _long_request()
    tri = triage(req, 10)
    assert TASK in [m.content for m in tri.request.messages]
    assert 0 not in {d.index for d in tri.dropped}
    assert TASK in [m.content for m in minimal_request(req).messages]
    first = req.messages[0].model_copy(update={"pinned": False})
    unpinned = req.model_copy(update={"messages": [first, *req.messages[1:]]})
    # The same request without the pin loses the task statement (the test can fail).
    assert TASK not in [m.content for m in triage(unpinned, 10).request.messages]


def test_plan_summary_covers_exactly_what_triage_drops() -> None:
    req = _long_request()
    target = estimate_tokens(req) // 3
    plan = plan_summary(req, target, max_tokens=128)
    assert plan is not None
    assert plan.indices == [d.index for d in triage(req, target).dropped]
    assert 0 not in plan.indices
    assert plan.request.max_tokens == 128 and "step" in plan.request.messages[0].content


def test_plan_summary_skips_background_only_cuts() -> None:
    msgs = [
        Message(role="user", content="noise " * 300, priority=Priority.BACKGROUND),
        Message(role="user", content="question"),
    ]
    req = ChatRequest(messages=msgs)
    assert plan_summary(req, estimate_tokens(req) - 50, max_tokens=64) is None
    assert plan_summary(req, 10_000, max_tokens=64) is None


def test_with_summary_replaces_dropped_messages_in_place() -> None:
    req = _long_request()
    plan = plan_summary(req, estimate_tokens(req) // 3, max_tokens=128)
    assert plan is not None
    out = with_summary(req, plan.indices, "  the gist  ")
    assert out.messages[0].content == TASK and out.messages[0].pinned
    summary = out.messages[min(plan.indices)]
    assert summary.content.startswith(SUMMARY_HEADER.format(n=len(plan.indices)))
    assert summary.content.endswith("the gist") and summary.priority is Priority.CRITICAL
    assert len(out.messages) == len(req.messages) - len(plan.indices) + 1
    assert out.messages[-1].content == "What is the next step?"


def test_summary_route_is_cheapest_healthy(demo_policy: PolicyConfig) -> None:
    """Researcher roster: cheap-mini is the cheapest; open or cooling routes are passed over."""
    role = demo_policy.role("researcher")
    ask = ChatRequest(messages=[Message(role="user", content="x " * 100)], max_tokens=64)
    now = 1000.0
    healthy = HealthSnapshot(taken_at=now)
    assert summary_route(role, demo_policy, healthy, ask, now) == "cheap-mini"
    sick = HealthSnapshot(
        taken_at=now,
        routes={"cheap-mini": RouteHealth(route="cheap-mini", breaker=BreakerState.OPEN)},
    )
    assert summary_route(role, demo_policy, sick, ask, now) == "gemini-flash"
    cooling = HealthSnapshot(
        taken_at=now,
        routes={"cheap-mini": RouteHealth(route="cheap-mini", cooldown_until=now + 5)},
    )
    assert summary_route(role, demo_policy, cooling, ask, now) == "gemini-flash"
    assert summary_route(role, demo_policy, healthy, ask, now, exclude=["cheap-mini"]) == (
        "gemini-flash"
    )


def test_pipeline_context_item_pin_reaches_the_request() -> None:
    """A pinned pipeline context item becomes a pinned turn; unpinned items stay droppable."""
    from agent_failover.resilience.pipeline import planner_request

    req = planner_request(
        "Do X",
        [("decision: use queue B", Priority.SUPPORTING, True), ("aside", Priority.SUPPORTING)],
        ["researcher"],
    )
    assert [m.pinned for m in req.messages] == [True, False, False]
    assert "decision: use queue B" in [m.content for m in triage(req, 1).request.messages]
