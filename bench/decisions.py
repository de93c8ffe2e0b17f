"""Benchmark: the failover decisions (breakers, SLA demotion, trials), alike on any version.

Run it with this checkout's interpreter for "after", and with an interpreter whose
``agent_failover`` is an older commit for "before" (it only uses APIs both have), then
compare the two JSON documents side by side. Sections (``--only`` picks some):

* ``rate_limit`` (dev server, demo policy, role ``plain``): a 429 with Retry-After 1.5 s
  on the primary, once: caller wait, answering route, attempts per route. Then a 429
  with Retry-After 4 s (above ``rate_limit.max_wait_ms``): how long until a call is
  answered by the primary again (the route's time out of service).
* ``probes`` (time-skipping server, demo policy: probes every 3 s, five routes): provider
  calls the monitor makes per minute of workflow time, idle and with one real call per
  second on the primary.
* ``context`` (dev server): role ``ctx`` = tier 0 ``cheap-mini`` configured with 200k
  (the simulator's model holds 32k), tier 1 ``openai-us`` with no configured window; three
  calls with a 40k-token prompt: attempts and caller wait per call.
* ``restoration`` (time-skipping server, default monitor settings: probes every 12 s, SLA
  window 60 s, min_samples 10): seconds until a latency-demoted primary that recovered
  at t=0 answers a call again (checked every 6 s, up to 10 minutes).
* ``baseline`` (in-memory health store, fake clock): one call per second at 200 ms for
  two hours, then a linear 30x ramp over 20 minutes; when the slow-call breaker trips,
  and whether a route that was always at 6 s trips.

Usage::

    .venv/bin/python bench/decisions.py --out bench/out/decisions-after.json
    # "before": an older checkout's interpreter running this file
    /path/to/old/.venv/bin/python "$PWD/bench/decisions.py" --out bench/out/decisions-before.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import agent_failover
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.contracts import AgentOutput, CallOutcome
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.stores.health import MemoryHealthStore
from agent_failover.testing.harness import make_harness, running
from agent_failover.testing.roles import with_test_roles
from agent_failover.testing.servers import start_dev_server, start_time_skipping
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import start_simulator
from agent_failover.testing.workflows import CallInput, ResilientCallWorkflow
from agent_failover.workflows.models import MonitorInput
from agent_failover.workflows.monitor import HealthMonitorWorkflow

PRIMARY, STANDBY, CHEAP = "anthropic-us-east", "openai-us", "cheap-mini"
SECTIONS = ("rate_limit", "probes", "context", "restoration", "baseline")


def _req(text: str | None = None) -> ChatRequest:
    body = text or f"bench {uuid.uuid4().hex[:8]}"
    return ChatRequest(messages=[Message(role="user", content=body)], max_tokens=120)


async def _call(h: Any, role: str = "plain", request: ChatRequest | None = None) -> AgentOutput:
    return await h.client.execute_workflow(
        ResilientCallWorkflow.run,
        CallInput(role=role, request=request or _req()),
        id=f"bench-{uuid.uuid4().hex[:10]}",
        task_queue=h.task_queue,
        result_type=AgentOutput,
    )


async def _seen(admin: SimAdmin) -> Counter[str]:
    return Counter(a["endpoint"] for a in await admin.attempts())


# --- 1.1 rate limits ------------------------------------------------------------------------


async def _until_called(admin: SimAdmin, route: str, timeout_s: float = 10.0) -> None:
    """Poll the simulator's attempt log until ``route`` was called once."""
    deadline = time.perf_counter() + timeout_s
    while True:
        if (await _seen(admin))[route] >= 1:
            return
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{route} was never called")
        await asyncio.sleep(0.01)


async def _short_retry_after(env: Any, policy: PolicyConfig, admin: SimAdmin) -> dict:
    h, workers = await make_harness(env.client, policy)
    async with running(workers):
        await admin.reset()
        t0 = time.perf_counter()
        await _call(h)  # warm-up: the first workflow on a fresh server is slow
        await _call(h)
        healthy = time.perf_counter() - t0
        await admin.reset()
        await admin.set_faults(PRIMARY, [{"kind": "rate_limit", "retry_after": 1.5}])
        t0 = time.perf_counter()
        task = asyncio.create_task(_call(h))
        await _until_called(admin, PRIMARY)
        await admin.clear()  # the 429 happens once
        out = await task
        waited = time.perf_counter() - t0
        seen = await _seen(admin)
    return {
        "healthy_call_s": round(healthy / 2, 3),
        "caller_wait_s": round(waited, 3),
        "answered_by": out.route,
        "tier": out.tier,
        "attempts_seen": dict(seen),
    }


async def _out_of_service(env: Any, policy: PolicyConfig, admin: SimAdmin) -> dict:
    h, workers = await make_harness(env.client, policy)
    async with running(workers):
        await admin.reset()
        await admin.set_faults(PRIMARY, [{"kind": "rate_limit", "retry_after": 4}])
        first = await _call(h)
        t0 = time.perf_counter()
        await admin.clear()
        while True:
            out = await _call(h)
            if out.route == PRIMARY or time.perf_counter() - t0 > 120:
                break
            await asyncio.sleep(0.25)
    return {
        "first_call_answered_by": first.route,
        "primary_back_after_s": round(time.perf_counter() - t0, 2),
    }


async def bench_rate_limit() -> dict:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_dev_server(ui=False)
    admin = SimAdmin(sim.url)
    policy = with_test_roles(load_policy(DEFAULT_POLICY_PATH))
    try:
        return {
            "retry_after_1_5s": await _short_retry_after(env, policy, admin),
            "retry_after_4s": await _out_of_service(env, policy, admin),
        }
    finally:
        await admin.aclose()
        await env.shutdown()
        await sim.stop()


# --- 1.2 probes -----------------------------------------------------------------------------


async def _probe_minute(env: Any, policy: PolicyConfig, admin: SimAdmin, load: bool) -> dict:
    h, workers = await make_harness(env.client, policy)
    async with running(workers):
        await admin.reset()
        monitor = await h.client.start_workflow(
            HealthMonitorWorkflow.run,
            MonitorInput(routes=sorted(policy.endpoints), interval_s=policy.probes.interval_s),
            id=f"bench-monitor-{uuid.uuid4().hex[:8]}",
            task_queue=h.task_queue,
        )
        calls = 0
        began = (await env.get_current_time()).timestamp()
        for _ in range(60):
            if load:
                # Auto time-skipping off: otherwise the server jumps to the monitor's next
                # timer while the call runs.
                with env.auto_time_skipping_disabled():
                    out = await _call(h)
                calls += sum(
                    1 for a in out.attempts if a.route == PRIMARY and a.outcome != "skipped"
                )
            await env.sleep(1)
        minutes = ((await env.get_current_time()).timestamp() - began) / 60
        await monitor.terminate()
        seen = await _seen(admin)
    probes = sum(seen.values()) - calls
    return {
        "workflow_minutes": round(minutes, 2),
        "real_calls": calls,
        "probe_calls_per_min": round(probes / minutes, 1),
        "by_route": dict(seen),
    }


async def bench_probes() -> dict:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_time_skipping()
    admin = SimAdmin(sim.url)
    policy = with_test_roles(load_policy(DEFAULT_POLICY_PATH))
    try:
        return {
            "probe_interval_s": policy.probes.interval_s,
            "idle": await _probe_minute(env, policy, admin, load=False),
            "one_call_per_s_on_primary": await _probe_minute(env, policy, admin, load=True),
        }
    finally:
        await admin.aclose()
        await env.shutdown()
        await sim.stop()


# --- 1.3 context windows --------------------------------------------------------------------


def _unconfigured(ep: EndpointConfig) -> EndpointConfig:
    """The endpoint as written without ``context_window`` (whatever the version defaults)."""
    data = ep.model_dump(mode="json")
    del data["context_window"]
    return EndpointConfig.model_validate(data)


def _ctx_policy(policy: PolicyConfig) -> PolicyConfig:
    eps = dict(policy.endpoints)
    eps[CHEAP] = eps[CHEAP].model_copy(update={"context_window": 200_000})
    eps[STANDBY] = _unconfigured(eps[STANDBY])
    plain = policy.role("plain")
    roster = plain.roster.model_copy(update={"tier0": [CHEAP], "tier1": [STANDBY], "tier2": []})
    ctx = plain.model_copy(update={"name": "ctx", "roster": roster})
    return policy.model_copy(update={"endpoints": eps, "roles": {**policy.roles, "ctx": ctx}})


async def bench_context() -> dict:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_dev_server(ui=False)
    admin = SimAdmin(sim.url)
    policy = _ctx_policy(with_test_roles(load_policy(DEFAULT_POLICY_PATH)))
    big = ChatRequest(messages=[Message(role="user", content="word " * 32_000)], max_tokens=120)
    rows = []
    try:
        h, workers = await make_harness(env.client, policy)
        async with running(workers):
            await admin.reset()
            for i in range(3):
                t0 = time.perf_counter()
                out = await _call(h, "ctx", big)
                rows.append(
                    {
                        "call": i + 1,
                        "caller_wait_s": round(time.perf_counter() - t0, 3),
                        "answered_by": out.route,
                        "attempts": [f"{a.route}:{a.outcome}" for a in out.attempts],
                    }
                )
            seen = await _seen(admin)
    finally:
        await admin.aclose()
        await env.shutdown()
        await sim.stop()
    return {"calls": rows, "attempts_seen": dict(seen)}


# --- 1.5 restoration ------------------------------------------------------------------------


def _sla_policy(policy: PolicyConfig) -> PolicyConfig:
    plain = policy.role("plain")
    sla = plain.sla.model_copy(update={"p95_ms": 300.0, "p99_ms": 600.0})
    role = plain.model_copy(update={"name": "sla", "sla": sla})
    return policy.model_copy(update={"roles": {**policy.roles, "sla": role}})


async def bench_restoration(limit_s: float = 600.0) -> dict:
    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_time_skipping()
    policy = _sla_policy(with_test_roles(load_policy(DEFAULT_POLICY_PATH)))
    h, workers = await make_harness(env.client, policy)
    restored: float | None = None
    try:
        async with running(workers):
            now = (await env.get_current_time()).timestamp()
            settings = policy.breaker_for(PRIMARY)
            for i in range(12):
                slow = CallOutcome(route=PRIMARY, at=now - 12 + i, ok=True, latency_ms=2000.0)
                await h.health.record(slow, settings)
            with env.auto_time_skipping_disabled():
                first = await _call(h, "sla")
            monitor = await h.client.start_workflow(
                HealthMonitorWorkflow.run,
                MonitorInput(routes=[PRIMARY], interval_s=12.0),
                id=f"bench-monitor-{uuid.uuid4().hex[:8]}",
                task_queue=h.task_queue,
            )
            t = 0.0
            while restored is None and t < limit_s:
                await env.sleep(6)
                t += 6
                with env.auto_time_skipping_disabled():
                    if (await _call(h, "sla")).route == PRIMARY:
                        restored = t
            await monitor.terminate()
    finally:
        await env.shutdown()
        await sim.stop()
    return {
        "demoted_first_call_answered_by": first.route,
        "probe_interval_s": 12.0,
        "restored_after_s": restored,
        "checked_up_to_s": limit_s,
    }


# --- 1.6 baseline ---------------------------------------------------------------------------


async def _ramp(latency_at: Any, seconds: int, start: float) -> float | None:
    store = MemoryHealthStore()
    settings = load_policy(DEFAULT_POLICY_PATH, env={}).breaker_for(PRIMARY)
    settings = settings.model_copy(update={"slow_call_ms": None})
    for i in range(seconds):
        lat = latency_at(i) * (0.8 + 0.4 * ((i * 7919) % 101) / 100)
        t = await store.record(
            CallOutcome(route=PRIMARY, at=start + i, ok=True, latency_ms=lat), settings
        )
        if t is not None and t.reason.value == "slow_calls":
            return float(i)
    return None


async def bench_baseline() -> dict:
    start = 472_222 * 3600.0
    steady, ramp_s = 7200, 1200

    def ramp(i: int) -> float:
        return 200.0 if i < steady else 200.0 * (1 + 29 * min(1.0, (i - steady) / ramp_s))

    tripped = await _ramp(ramp, steady + ramp_s + 600, start)
    slow = await _ramp(lambda i: 6000.0, steady + ramp_s + 600, start)
    into = None if tripped is None else tripped - steady
    return {
        "ramp_tripped_s_into_ramp": into,
        "latency_at_trip_ms": None if tripped is None else round(ramp(int(tripped))),
        "always_slow_route_tripped": slow is not None,
    }


CODE = str(Path(agent_failover.__file__).resolve().parents[1])


async def main(only: list[str]) -> dict[str, Any]:
    report: dict[str, Any] = {"code": CODE}
    for name in only:
        t0 = time.perf_counter()
        report[name] = await globals()[f"bench_{name}"]()
        report[name]["bench_wall_s"] = round(time.perf_counter() - t0, 1)
    return report


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument(
        "--out", default=None, help="also write the JSON here (Temporal's core logs to stdout)"
    )
    args = ap.parse_args()
    text = json.dumps(asyncio.run(main(args.only)), indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
