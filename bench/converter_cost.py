"""Benchmark: the payload conversions of one resilient call, SDK converter vs ours.

Replays, per call, what a worker and its client convert for ``ResilientTextWorkflow``
(one ``resilient_complete`` on the ``plain`` role of the demo policy), the way the worker
does it: the workflow's side on a payload converter built for the run (the worker's
``payload_converter_factory``, once per workflow run), the activities' side on
``DataConverter.with_context(ActivitySerializationContext(...))``. Per call: the client
encodes the input, the workflow decodes it (no type hint: ``*args: Any``); the
``role_context`` local activity decodes its input and encodes its ``RoleContext``, which
the workflow decodes; the workflow encodes the attempt's ``CallModelInput``, which
``call_model`` decodes, and encodes its ``CallModelResult``, which the workflow decodes;
the workflow encodes its text, the client decodes it.

Arms, alternated round by round: ``sdk`` (``temporalio.contrib.pydantic``'s
``pydantic_data_converter``) and ``ours`` (:mod:`agent_failover.converter`). Every
payload of the two arms is compared byte for byte first (the run fails if one differs).
Prints JSON: microseconds per call (median of the rounds) per arm, the ratio, and the
TypeAdapters and payload converters each arm built per call. Usage::

    .venv/bin/python bench/converter_cost.py --calls 2000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import ActivitySerializationContext, DataConverter, PayloadConverter

from agent_failover.activities.models import (
    CacheWrite,
    CallModelInput,
    CallModelResult,
    HeldLease,
    RoleContext,
    RoleContextInput,
)
from agent_failover.activities.policy_registry import policy_ref
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.converter import failover_pydantic_data_converter
from agent_failover.resilience.cachekey import cache_key
from agent_failover.resilience.contracts import (
    HealthSnapshot,
    RecentSample,
    RouteHealth,
    WindowStats,
)
from agent_failover.resilience.models import ChatReply, ChatRequest, Message, Usage
from agent_failover.testing.roles import with_test_roles
from agent_failover.testing.workflows import CallInput

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_facts import loadavg  # beside this file

ROLE = "plain"
NOW = 1_796_520_557.16797


def _role_context() -> RoleContext:
    """The role context as the local activity returns it after a few calls: every route
    of the role with window stats, the first with recent observations and the lease."""
    policy = with_test_roles(load_policy(DEFAULT_POLICY_PATH))
    sub = policy.subset_for(ROLE)
    routes = {}
    for i, route in enumerate(sub.endpoints):
        stats = WindowStats(window_s=60.0, calls=12 + i, p95_ms=120.125 + i, latency_samples=12)
        recent = [RecentSample(at=NOW - j, latency_ms=99.25 + j, ok=True) for j in range(3)]
        routes[route] = RouteHealth(route=route, stats=stats, recent=recent if i == 0 else [])
    first = next(iter(sub.endpoints))
    ctx = RoleContext(
        role=sub.role(ROLE),
        policy=sub,
        snapshot=HealthSnapshot(taken_at=NOW, routes=routes),
        task_queue="bench",
        overflow_queue="bench-llm-core",
        policy_ref=policy_ref(sub),
        lease=HeldLease(route=first, id="9f02b9df313b4bd1", until=NOW + 19.5),
    )
    return ctx.for_history(newest_observation=False, own_queue="bench")


def _values() -> dict[str, tuple[Any, type | None]]:
    """Each payload of the call: its value and the type hint it is decoded with."""
    system = "You analyse one subtask and state conclusions with their confidence."
    request = ChatRequest(messages=[Message(role="user", content="leased")])
    attempt_request = request.model_copy(update={"system": system})
    ctx = _role_context()
    route = ctx.lease.route if ctx.lease else ""
    text = "[echo: leased] " + " ".join(["Echo orchid jasper meadow coral thistle"] * 8)
    reply = ChatReply(
        text=text,
        endpoint=route,
        model="claude-sonnet-4-5",
        finish_reason="stop",
        usage=Usage(input_tokens=19, output_tokens=97),
        cost_usd=0.001512,
        ttft_ms=20.963,
        latency_ms=130.757,
    )
    attempt = CallModelInput(
        role=ROLE,
        route=route,
        request=attempt_request,
        ttft_budget_ms=2000.0,
        idle_budget_ms=2000.0,
        timeout_ms=10000.0,
        now=NOW,
        deadline_at=NOW + 19.48,
        cache=CacheWrite(key=cache_key(ROLE, attempt_request), keep_s=43200.0),
        lease=ctx.lease,
    )
    return {
        "workflow input": (CallInput(role=ROLE, request=request), None),
        "role_context input": (
            RoleContextInput(role=ROLE, now=NOW, workflow_queue="bench", lease=True),
            RoleContextInput,
        ),
        "role context": (ctx, RoleContext),
        "attempt input": (attempt, CallModelInput),
        "attempt result": (CallModelResult(reply=reply).for_route(route), CallModelResult),
        "workflow result": (text, str),
    }


#: Who converts each payload, in the call's order: (payload, encoder side, decoder side).
STEPS = (
    ("workflow input", "client", "workflow"),
    ("role_context input", "workflow", "activity"),
    ("role context", "activity", "workflow"),
    ("attempt input", "workflow", "activity"),
    ("attempt result", "activity", "workflow"),
    ("workflow result", "workflow", "client"),
)
_ACTIVITY = ActivitySerializationContext(
    namespace="default",
    activity_id="1",
    activity_type="call_model",
    activity_task_queue="bench",
    workflow_id="bench",
    workflow_type="ResilientTextWorkflow",
    is_local=False,
)


def one_call(conv: DataConverter, values: dict[str, tuple[Any, type | None]]) -> list[bytes]:
    """The call's conversions on ``conv``; returns the payloads' bytes."""
    sides: dict[str, PayloadConverter] = {
        "client": conv.payload_converter,
        "workflow": conv._new_payload_converter(),  # the worker's factory, once per run
    }
    out = []
    for name, encoder, decoder in STEPS:
        sides["activity"] = conv.with_context(_ACTIVITY).payload_converter
        value, hint = values[name]
        [payload] = sides[encoder].to_payloads([value])
        sides[decoder].from_payloads([payload], [hint] if hint is not None else None)
        out.append(payload.SerializeToString(deterministic=True))
    return out


class _Counts:
    """TypeAdapters and payload converters built while counting."""

    def __init__(self) -> None:
        self.adapters = 0
        self.converters = 0

    def counting(self, cls: type, attr: str) -> Callable[[], None]:
        original = cls.__init__

        def init(obj: Any, *args: Any, **kwargs: Any) -> None:
            setattr(self, attr, getattr(self, attr) + 1)
            original(obj, *args, **kwargs)

        cls.__init__ = init  # type: ignore[method-assign]
        return lambda: setattr(cls, "__init__", original)


def _built_per_call(conv: DataConverter, values: dict[str, Any], calls: int) -> dict[str, float]:
    counts = _Counts()
    undo = [
        counts.counting(pydantic.TypeAdapter, "adapters"),
        counts.counting(type(conv.payload_converter._inner_payload_converter), "converters"),  # type: ignore[attr-defined]
    ]
    try:
        for _ in range(calls):
            one_call(conv, values)
    finally:
        for u in undo:
            u()
    return {
        "type_adapters": counts.adapters / calls,
        "payload_converters": counts.converters / calls,
    }


def main(calls: int, rounds: int) -> dict[str, Any]:
    values = _values()
    arms = {"sdk": pydantic_data_converter, "ours": failover_pydantic_data_converter()}
    if one_call(arms["sdk"], values) != one_call(arms["ours"], values):
        raise SystemExit("the two converters wrote different payloads")
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    for _ in range(rounds):
        for arm, conv in arms.items():
            one_call(conv, values)  # warm
            t0 = time.perf_counter()
            for _ in range(calls):
                one_call(conv, values)
            times[arm].append((time.perf_counter() - t0) / calls * 1e6)
    med = {arm: statistics.median(ts) for arm, ts in times.items()}
    return {
        "benchmark": "converter_cost",
        "calls": calls,
        "rounds": rounds,
        "load_average": loadavg(),
        "unit": "microseconds per call (its six payloads encoded and decoded)",
        "payload_bytes": sum(len(p) for p in one_call(arms["ours"], values)),
        "identical_payloads": True,
        "arms": {
            arm: {"median": med[arm], "rounds": times[arm], **_built_per_call(conv, values, 50)}
            for arm, conv in arms.items()
        },
        "ratio_ours_to_sdk": med["ours"] / med["sdk"],
        "saved_per_call_us": med["sdk"] - med["ours"],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = main(args.calls, args.rounds)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
