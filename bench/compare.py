"""Benchmark: the same outage timelines through agent-failover, plain retries and LiteLLM.

One run, one simulator, the same drill files (``bench/scenarios/``) and request schedule
for every arm, one arm after the other on each timeline:

(a) ``agent-failover``: ``resilient_complete`` in a Temporal workflow, health monitor on.
(b) ``retry-primary``: the Anthropic SDK against the primary only, its exponential
    backoff with ``max_retries=4`` (honours Retry-After), 10 s per attempt.
(c) ``litellm``: LiteLLM Router called directly, configured as its reliability docs
    recommend: fallbacks primary -> other Anthropic region / OpenAI -> the cheap model,
    ``num_retries=2``, ``allowed_fails=3``, ``cooldown_time`` = our breaker's open time,
    ``timeout`` = the role's attempt timeout.
(d) ``litellm-activity``: the same Router inside one bare Temporal activity (how a
    PydanticAI or OpenAI-Agents-on-Temporal user runs a model call), activity retries
    3 attempts, 1 s backoff.

LiteLLM is a bench-only extra (``pip install -e '.[bench]'``); its cost map is the local
copy (``LITELLM_LOCAL_MODEL_COST_MAP``), so it makes no network call. Prints one JSON
document (every arm's per-phase figures, plus ratios against agent-failover), writes a
PNG per scenario. Usage::

    .venv/bin/python bench/compare.py --scenarios hard_primary_outage rate_limit_storm \\
        --out bench/out/compare
"""

from __future__ import annotations

import os

# Before litellm is imported anywhere: never fetch the remote model cost map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agent_failover.cli.drill import (
    agent_failover_arm,
    draw_timelines,
    drill_arm,
    drill_policy,
    report_table,
    simulator_admin,
    write_json,
)
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.models import ChatRequest
from agent_failover.testing.drill import load_drill
from agent_failover.testing.drill_run import ArmResult
from agent_failover.testing.servers import start_dev_server

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
PRIMARY = "anthropic-us-east"
#: LiteLLM deployments: (model group, route, litellm model string). Bedrock and Vertex
#: need cloud credentials in LiteLLM even against a simulator, so its standbys are the
#: routes it can reach with an API key: the other Anthropic region and OpenAI.
LITELLM_ROUTES = [
    ("primary", "anthropic-us-east", "anthropic/claude-sonnet-4-5"),
    ("standby", "anthropic-eu-west", "anthropic/claude-sonnet-4-5"),
    ("standby", "openai-us", "openai/gpt-4.1"),
    ("cheap", "cheap-mini", "openai/mistral-small-latest"),
]


def _prompt(request: ChatRequest) -> list[dict[str, str]]:
    return [{"role": m.role, "content": str(m.content)} for m in request.messages]


class RetryPrimaryArm:
    """(b) The vendor SDK's exponential backoff on the primary, nothing else."""

    name = "retry-primary"
    background_calls = False

    def __init__(self, policy: PolicyConfig) -> None:
        import anthropic

        ep = policy.endpoint(PRIMARY)
        self.model = ep.model
        self.client = anthropic.AsyncAnthropic(
            api_key="sim", base_url=str(ep.base_url), max_retries=4, timeout=10.0
        )

    async def call(self, index: int, request: ChatRequest) -> ArmResult:
        """One ``messages.create``; the SDK retries 408/409/429/5xx with backoff."""
        try:
            msg = await self.client.messages.create(
                model=self.model, max_tokens=request.max_tokens or 64, messages=_prompt(request)
            )
        except Exception as exc:  # the SDK's typed errors: counted as failures
            return ArmResult("failed", error=type(exc).__name__)
        u = msg.usage
        return ArmResult("answered", 0, PRIMARY, 0, u.input_tokens, u.output_tokens)


def build_router(policy: PolicyConfig) -> Any:
    """LiteLLM Router over the simulator with fallbacks, retries and cooldowns."""
    import litellm
    from litellm import Router

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    model_list = []
    for group, route, model in LITELLM_ROUTES:
        ep = policy.endpoint(route)
        base = str(ep.base_url)
        model_list.append(
            {
                "model_name": group,
                "litellm_params": {"model": model, "api_base": base, "api_key": "sim"},
                "model_info": {"id": route},
            }
        )
    role = policy.role("plain")
    return Router(
        model_list=model_list,
        fallbacks=[{"primary": ["standby"]}, {"standby": ["cheap"]}],
        num_retries=2,
        allowed_fails=3,
        cooldown_time=policy.breaker.open_duration_s,
        timeout=role.attempt_timeout_ms / 1000.0,
    )


async def router_call(router: Any, request: ChatRequest) -> dict[str, Any]:
    """One Router completion; the route that answered and the tokens."""
    resp = await router.acompletion(
        model="primary", messages=_prompt(request), max_tokens=request.max_tokens or 64
    )
    route = (getattr(resp, "_hidden_params", None) or {}).get("model_id")
    usage = resp.usage
    return {"route": route, "in": usage.prompt_tokens, "out": usage.completion_tokens}


def _tier_of(policy: PolicyConfig, route: str | None) -> int | None:
    roster = policy.role("plain").roster
    for tier, routes in enumerate((roster.tier0, roster.tier1, roster.tier2)):
        if route in routes:
            return tier
    return None


class LiteLLMArm:
    """(c) LiteLLM Router, called directly."""

    name = "litellm"
    background_calls = False

    def __init__(self, policy: PolicyConfig) -> None:
        self.policy = policy
        self.router = build_router(policy)

    async def call(self, index: int, request: ChatRequest) -> ArmResult:
        """One Router completion; any exception is a failure the caller sees."""
        try:
            r = await router_call(self.router, request)
        except Exception as exc:
            return ArmResult("failed", error=type(exc).__name__)
        return _litellm_result(self.policy, r)


def _litellm_result(policy: PolicyConfig, r: dict[str, Any]) -> ArmResult:
    tier = _tier_of(policy, r["route"])
    return ArmResult("answered", tier, r["route"], 0, r["in"] or 0, r["out"] or 0)


_ROUTER: Any = None


@activity.defn(name="litellm_complete")
async def litellm_complete(request: ChatRequest) -> dict[str, Any]:
    """The bare activity: the Router call, nothing else (retries are Temporal's)."""
    return await router_call(_ROUTER, request)


@workflow.defn(name="BareLiteLLMWorkflow", sandboxed=False)
class BareLiteLLMWorkflow:
    """One activity, as an agent framework on Temporal runs a model call."""

    @workflow.run
    async def run(self, request: ChatRequest) -> dict[str, Any]:
        return await workflow.execute_activity(
            litellm_complete,
            request,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_attempts=3
            ),
        )


class LiteLLMActivityArm:
    """(d) LiteLLM Router inside one bare Temporal activity."""

    name = "litellm-activity"
    background_calls = False

    def __init__(self, client: Client, policy: PolicyConfig, task_queue: str) -> None:
        self.client, self.policy, self.task_queue = client, policy, task_queue

    async def call(self, index: int, request: ChatRequest) -> ArmResult:
        """Run the bare workflow; a failed workflow is a failure the caller sees."""
        try:
            r = await self.client.execute_workflow(
                BareLiteLLMWorkflow.run,
                request,
                id=f"litellm-{index}-{os.urandom(4).hex()}",
                task_queue=self.task_queue,
                result_type=dict,
            )
        except WorkflowFailureError as exc:
            return ArmResult("failed", error=type(exc.cause).__name__)
        return _litellm_result(self.policy, r)


KEYS = ("success_rate", "p50_ms", "p95_ms", "p99_ms", "amplification", "cost_vs_all_primary")


def ratios(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each arm's fault-phase figures as a ratio to agent-failover's (>1: the arm is higher)."""
    base = reports["agent-failover"]["phases"].get("fault", {})
    out: dict[str, Any] = {}
    for arm, rep in reports.items():
        fig = rep["phases"].get("fault", {})
        out[arm] = {
            k: round(fig[k] / base[k], 3) if fig.get(k) is not None and base.get(k) else None
            for k in KEYS
        }
        for k in ("detection_s", "restoration_s"):
            out[arm][k] = rep[k]
    return out


async def _arms(client: Client, policy: PolicyConfig, bare_queue: str):
    yield "agent-failover", lambda: agent_failover_arm(client, policy, "plain")
    yield "retry-primary", lambda: _plain(RetryPrimaryArm(policy))
    yield "litellm", lambda: _plain(LiteLLMArm(policy))
    yield "litellm-activity", lambda: _plain(LiteLLMActivityArm(client, policy, bare_queue))


class _plain:
    def __init__(self, arm: Any) -> None:
        self.arm = arm

    async def __aenter__(self) -> Any:
        return self.arm

    async def __aexit__(self, *exc: object) -> None:
        return None


async def main(names: list[str], out: Path, scale: float, arms: set[str]) -> dict[str, Any]:
    """Every scenario through every arm; JSON per run, PNG per scenario."""
    global _ROUTER
    console = Console(stderr=True, width=160)
    result: dict[str, Any] = {"scale": scale, "scenarios": {}}
    async with simulator_admin() as admin:
        policy = drill_policy(DEFAULT_POLICY_PATH, admin.url)
        env = await start_dev_server(ui=False)
        bare = Worker(
            env.client,
            task_queue="bench-litellm",
            workflows=[BareLiteLLMWorkflow],
            activities=[litellm_complete],
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        try:
            async with bare:
                for name in names:
                    drill = load_drill(SCENARIOS / f"{name}.yaml").scaled(scale)
                    runs = {}
                    async for arm_name, make in _arms(env.client, policy, "bench-litellm"):
                        if arm_name not in arms:
                            continue
                        _ROUTER = build_router(policy)  # fresh cooldown state per run
                        await admin.reset()
                        async with make() as arm:
                            runs[arm_name] = await drill_arm(drill, arm, admin, policy, console)
                        console.print(report_table(runs[arm_name][0], f"{name} · {arm_name}"))
                    reports = {k: v[0] for k, v in runs.items()}
                    png = out / f"compare_{name}.png"
                    draw_timelines(runs, png, f"{name}: same timeline, four arms")
                    result["scenarios"][name] = {
                        "png": str(png),
                        "arms": reports,
                        "ratio_vs_agent_failover": ratios(reports)
                        if "agent-failover" in reports
                        else None,
                    }
                    write_json(out / f"compare_{name}.json", result["scenarios"][name])
        finally:
            await env.shutdown()
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scenarios", nargs="+", default=[p.stem for p in SCENARIOS.glob("*.yaml")])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every time in the files")
    ap.add_argument("--out", type=Path, default=Path("bench/out/compare"))
    ap.add_argument(
        "--arms",
        nargs="+",
        default=["agent-failover", "retry-primary", "litellm", "litellm-activity"],
    )
    args = ap.parse_args()
    # Temporal's core and the dev server log on fd 1; keep stdout for the JSON alone.
    sys.stdout.flush()
    json_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    res = asyncio.run(main(args.scenarios, args.out, args.scale, set(args.arms)))
    summary = {
        n: {"png": s["png"], "ratio_vs_agent_failover": s["ratio_vs_agent_failover"]}
        for n, s in res["scenarios"].items()
    }
    json_out.write(json.dumps({"scale": res["scale"], "scenarios": summary}, indent=2) + "\n")
    json_out.flush()
