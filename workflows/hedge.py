"""Hedging: a second route raced against a slow first one, the first good answer kept.

When the plan marks the next attempt as a hedge (and the role has hedges left), the first
attempt starts alone; if it has not answered by the hedge delay (a named timer), the
hedge starts too. The first of the two to answer wins; the other is cancelled and
recorded as having lost the race. A first attempt that fails before the delay is plain
sequential failover: the hedge then runs as the next attempt.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_failover.resilience.config import RolePolicy
    from agent_failover.resilience.contracts import AttemptRecord, ReasonCode
    from agent_failover.resilience.planner import FailoverPlan, PlannedAttempt
    from agent_failover.workflows import observe
    from agent_failover.workflows.attempts import collect, single, start
    from agent_failover.workflows.call import AttemptResult, Call


def hedge_for(call: Call, p: FailoverPlan, role: RolePolicy) -> PlannedAttempt | None:
    """The plan's second attempt when it is a hedge the role still has budget for."""
    if len(p.attempts) > 1 and p.attempts[1].hedge and call.hedges_used < role.hedging.max_hedges:
        return p.attempts[1]
    return None


async def hedged(call: Call, first: PlannedAttempt, hedge: PlannedAttempt) -> list[AttemptResult]:
    """Start ``first``; if it has not answered by the hedge delay, race ``hedge`` too."""
    h1, p1, t1 = start(call, first)
    if not await _hedge_due(h1, first, hedge):
        r1 = await collect(call, first, h1, p1, t1)
        if r1.result is not None:
            return [r1]
        # The primary failed before the hedge was due: plain sequential failover.
        return [r1, *await single(call, hedge)]
    call.hedges_used += 1
    observe.hedge(call, "fired", h1, hedge)
    h2, p2, t2 = start(call, hedge)
    return await _race(call, {h1: (first, p1, t1), h2: (hedge, p2, t2)})


async def _hedge_due(h1: asyncio.Task[Any], first: PlannedAttempt, hedge: PlannedAttempt) -> bool:
    """Wait for the first attempt or the hedge delay; True when the delay came first.

    The timer is a named one so the Temporal UI says what it waits for, and it is started
    in the same step as the attempt it races (a condition with a timeout, not a sleep in
    a task of its own): started one loop step later, a concurrent call resumed in the same
    activation could put its commands in between, and a worker replaying the run (one
    replacing a killed worker) could resume the calls in other activations and meet a
    timer where history had that call's activity.
    """
    delay_s = hedge.start_offset_ms / 1000
    summary = f"hedge: {hedge.route} starts unless {first.route} answers first"
    try:
        await workflow.wait_condition(h1.done, timeout=delay_s, timeout_summary=summary)
    except TimeoutError:
        return not h1.done()  # both in one activation: the answer wins
    return False


async def _race(
    call: Call, handles: dict[asyncio.Task[Any], tuple[PlannedAttempt, bool, float]]
) -> list[AttemptResult]:
    """Collect both attempts as they finish; the first answer wins, the other is cancelled."""
    results: list[AttemptResult] = []
    pending = list(handles)
    while pending:
        done, pending = await workflow.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for h in done:
            a, p, t = handles[h]
            r = await collect(call, a, h, p, t)
            results.append(r)
            if r.result is not None:
                for loser in pending:
                    la, _, lt = handles[loser]
                    loser.cancel()
                    observe.hedge(call, "cancelled", loser, la)
                    results.append(_lost(la, lt))
                r.record.note = (r.record.note + " won the hedge race").strip()
                observe.hedge(call, "won", h, a)
                call.state.add_reason(ReasonCode.HEDGED)
                return results
    return results


def _lost(attempt: PlannedAttempt, started_at: float) -> AttemptResult:
    """The cancelled loser of a hedge race (never collected: its record is made here)."""
    return AttemptResult(
        attempt,
        AttemptRecord(
            route=attempt.route,
            tier=attempt.tier,
            started_at=started_at,
            finished_at=workflow.now().timestamp(),
            outcome="cancelled",
            hedge=attempt.hedge,
            note="lost the hedge race",
        ),
    )
