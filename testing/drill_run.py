"""Running a drill: an open-loop request schedule against the simulator's timeline.

:func:`run_drill` loads the drill's scenario into the simulator, starts request *i* at
``i / rate`` seconds after the load (open loop: a slow answer never delays the next
request), waits for every request (each bounded by ``request_timeout_s``), and returns
the samples and the simulator's attempt arrivals. What a request *is* comes from an
:class:`Arm`: :class:`AgentFailoverArm` runs ``resilient_complete`` in a Temporal
workflow; ``bench/compare.py`` adds plain retries and LiteLLM Router. The drill is a
benchmark: it takes real time (the file's duration), bounded in requests and seconds.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from temporalio.client import Client, WorkflowFailureError

from agent_failover.activities.failures import BULKHEAD_FULL
from agent_failover.resilience.contracts import AgentOutput
from agent_failover.resilience.endpoint import Prices
from agent_failover.resilience.errors import ErrorClass
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.resilience.outcomes import BREAKER_REJECTED, RATE_BUDGET
from agent_failover.testing.drill import DrillFile, DrillSettings, Outcome, Sample
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.workflows import CallInput, ResilientCallWorkflow
from agent_failover.workflows.errors import FAILOVER_EXHAUSTED

#: Attempt outcomes that never reached a provider: a skipped route, a cache miss, and an
#: attempt the worker refused before sending (an open breaker, the rate budget, a full
#: bulkhead, its own connection slots all busy), which is a failover, not an upstream call.
_NOT_UPSTREAM = frozenset(
    {
        "skipped",
        "miss",
        "pending",
        BREAKER_REJECTED,
        RATE_BUDGET,
        BULKHEAD_FULL,
        ErrorClass.LOCAL_SATURATION.value,
    }
)
#: Answers that are not a model's (no tokens billed).
_LOCAL_ROUTES = frozenset({"cache", "static"})


@dataclass
class ArmResult:
    """What one arm's call came back with."""

    outcome: Outcome
    tier: int | None = None
    route: str | None = None
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None


class Arm(Protocol):
    """One way of making a resilient LLM call (agent-failover, plain retries, LiteLLM...)."""

    name: str
    #: Whether the arm calls providers outside requests (health probes). Without, every
    #: upstream call the simulator saw belongs to a request.
    background_calls: bool

    async def call(self, index: int, request: ChatRequest) -> ArmResult:
        """Make call number ``index``; never raises for a provider failure."""
        ...


def drill_request(index: int, max_tokens: int) -> ChatRequest:
    """A unique prompt per request, so no cache answers a live request by accident."""
    text = f"drill request {index} {uuid.uuid4().hex[:8]}: summarise the incident"
    return ChatRequest(messages=[Message(role="user", content=text)], max_tokens=max_tokens)


class AgentFailoverArm:
    """``resilient_complete`` for the drill's role, one workflow per request."""

    name = "agent-failover"
    background_calls = True

    def __init__(self, client: Client, task_queue: str, role: str) -> None:
        self.client, self.task_queue, self.role = client, task_queue, role

    async def call(self, index: int, request: ChatRequest) -> ArmResult:
        """Run :class:`ResilientCallWorkflow`; a ``FailoverExhausted`` is an escalation."""
        try:
            out = await self.client.execute_workflow(
                ResilientCallWorkflow.run,
                CallInput(role=self.role, request=request),
                id=f"drill-{index}-{uuid.uuid4().hex[:8]}",
                task_queue=self.task_queue,
                result_type=AgentOutput,
            )
        except WorkflowFailureError as exc:
            kind = getattr(exc.cause, "type", None)
            outcome: Outcome = "escalated" if kind == FAILOVER_EXHAUSTED else "failed"
            return ArmResult(outcome, error=f"{kind or type(exc.cause).__name__}")
        return result_of(out)


def result_of(out: AgentOutput) -> ArmResult:
    """An :class:`AgentOutput` as an arm result: tier, route, upstream calls, tokens."""
    calls = sum(
        1 for a in out.attempts if a.outcome not in _NOT_UPSTREAM and a.route not in _LOCAL_ROUTES
    )
    route = out.route or out.capability.value
    return ArmResult(
        "answered",
        tier=out.tier,
        route=route,
        attempts=calls,
        input_tokens=out.usage.input_tokens,
        output_tokens=out.usage.output_tokens,
    )


def to_sample(
    index: int,
    start_s: float,
    waited_s: float,
    res: ArmResult,
    prices: Mapping[str, Prices],
    primary: str,
) -> Sample:
    """Price the answer on its route and on the primary (the all-primary counterfactual)."""
    cost = primary_cost = 0.0
    if res.outcome == "answered" and res.route not in _LOCAL_ROUTES:
        cost = prices[res.route].cost(res.input_tokens, res.output_tokens) if res.route else 0.0
    if res.outcome == "answered":
        # Cache and static answers cost nothing; all-primary would still have paid for one.
        tokens = (res.input_tokens, res.output_tokens)
        primary_cost = prices[primary].cost(*tokens) if any(tokens) else 0.0
    return Sample(
        index=index,
        start_s=round(start_s, 4),
        ttfa_s=None if res.outcome == "failed" else round(waited_s, 4),
        outcome=res.outcome,
        tier=res.tier,
        route=res.route,
        attempts=res.attempts,
        cost_usd=cost,
        primary_cost_usd=primary_cost,
        error=res.error,
    )


async def _one(
    arm: Arm, index: int, at: float, t0: float, settings: DrillSettings
) -> tuple[float, float, ArmResult]:
    await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
    started = time.monotonic()
    try:
        res = await asyncio.wait_for(
            arm.call(index, drill_request(index, settings.max_tokens)),
            settings.request_timeout_s,
        )
    except TimeoutError:
        res = ArmResult("failed", error="timeout")
    except Exception as exc:  # an arm's bug must not end the drill; it is counted
        res = ArmResult("failed", error=f"{type(exc).__name__}: {exc}"[:200])
    return started - t0, time.monotonic() - started, res


async def run_open_loop(
    settings: DrillSettings,
    arm: Arm,
    prices: Mapping[str, Prices],
    *,
    on_done: Callable[[int], Any] | None = None,
) -> list[Sample]:
    """Start request *i* at ``i / rate`` seconds from now through ``arm``, wait for all,
    then for the rest of ``duration_s``; the samples (``start_s`` counts from the call)."""
    t0 = time.monotonic()
    requests = min(settings.max_requests, int(settings.rate_per_s * settings.duration_s))
    rate = settings.rate_per_s
    tasks = [asyncio.create_task(_one(arm, i, i / rate, t0, settings)) for i in range(requests)]
    samples: list[Sample] = []
    for i, fut in enumerate(tasks):
        start_s, waited, res = await fut
        samples.append(to_sample(i, start_s, waited, res, prices, settings.primary))
        if on_done is not None:
            on_done(i)
    # Let the timeline run out even if the last requests answered early.
    await asyncio.sleep(max(0.0, t0 + settings.duration_s - time.monotonic()))
    return samples


async def run_drill(
    drill: DrillFile,
    arm: Arm,
    admin: SimAdmin,
    prices: Mapping[str, Prices],
    *,
    on_done: Callable[[int], Any] | None = None,
    on_start: Callable[[], Any] | None = None,
) -> tuple[list[Sample], list[float]]:
    """Replay ``drill`` against the simulator through ``arm``; samples and arrivals.

    Arrival times are seconds after the scenario was loaded (the simulator's clock), so
    they line up with the samples' ``start_s`` (both count from the load). ``on_start``
    runs right after the load (a recording proxy marks the start there).
    """
    await admin.clear()
    await admin.clear_attempts()
    await admin.load_scenario(drill.scenario)
    loaded_at = float((await admin.scenario_status())["loaded_at"])
    if on_start is not None:
        on_start()
    samples = await run_open_loop(drill.drill, arm, prices, on_done=on_done)
    arrivals = [a.arrival - loaded_at for a in await admin.attempts()]
    await admin.clear_scenario()
    return samples, arrivals
