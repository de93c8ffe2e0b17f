"""Chaos with real processes: the worker running a critical step is SIGKILLed (issue 22 §2.2).

Two ``python worker.py`` processes serve one task queue. The critic's first model call is
on the wire when the process running it (and holding the run's sticky queue) is killed,
and the primary fails from then on, so its same-route retry fails too. Before the fix the
failure waited out the heartbeat timeout and then the SDK's 10 s sticky queue timeout:
past the critic's 15 s budget, the step fell to its static answer and the pipeline
escalated. Now the sticky wait is bounded (2 s) and every live tier keeps an attempt, so
the standby answers inside the budget and nothing escalates.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.contracts import Capability
from agent_failover.testing.procs import pipeline_step_worker_pid
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import RunningSimulator
from agent_failover.workflows.models import (
    EscalationState,
    PipelineInput,
    PipelineOptions,
    PipelineResult,
)
from agent_failover.workflows.monitor import monitor_workflow_id
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.chaos.helpers import PRIMARY, eventually, results_of

pytestmark = [pytest.mark.chaos, pytest.mark.devserver, pytest.mark.redis]
ROOT = Path(__file__).resolve().parents[2]


def _worker(dev_env: WorkflowEnvironment, sim: RunningSimulator, tq: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "SIM_URL": sim.url,
        "LOG_LEVEL": "WARNING",
        "FAILOVER_POLICY": str(DEFAULT_POLICY_PATH),
        "FAILOVER_TASK_QUEUE": tq,
        "FAILOVER_REDIS_NAMESPACE": tq,
    }
    return subprocess.Popen(
        [sys.executable, "worker.py"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(30)
        if p.poll() is None:
            p.kill()
            p.wait()


async def test_sigkill_mid_critic_step_is_answered_by_a_live_tier(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator, sim_admin: SimAdmin
) -> None:
    await sim_admin.set_faults(PRIMARY, [{"kind": "latency", "seconds": 1.0}])
    tq = f"sigkill-{uuid.uuid4().hex[:8]}"
    procs = [_worker(dev_env, simulator, tq) for _ in range(2)]
    handle = await dev_env.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task=f"sigkill {uuid.uuid4().hex[:6]}",
            options=PipelineOptions(
                escalation_timeout_s=2.0, escalation_timeout_action="accept_degraded"
            ),
        ),
        id=f"sigkill-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
        result_type=PipelineResult,
    )
    killed: list[int] = []
    try:

        async def kill_the_critics_worker() -> bool:
            pid = await pipeline_step_worker_pid(handle, "critic")
            if pid is None or pid not in [p.pid for p in procs]:
                return False
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return True

        await eventually(kill_the_critics_worker, timeout_s=90)
        # From now on the primary fails: its same-route retry on the other worker fails.
        await sim_admin.set_faults(PRIMARY, [{"kind": "overloaded"}])
        [result] = await results_of([handle], timeout_s=90)
    finally:
        await asyncio.to_thread(_stop, procs)
        with contextlib.suppress(Exception):
            await dev_env.client.get_workflow_handle(monitor_workflow_id(tq)).terminate()
    critic = next(s.output for s in result.steps if s.step.startswith("critic"))
    assert critic.tier in (0, 1, 2) and critic.capability is not Capability.STATIC, critic
    assert critic.attempts[0].route == PRIMARY and critic.attempts[0].outcome != "ok"
    assert result.escalation is EscalationState.NONE
    # The standby's attempt started inside the critic's budget: the lost worker cost the
    # heartbeat timeout and the bounded sticky wait, not the whole budget.
    budget_s = load_policy(DEFAULT_POLICY_PATH, env={}).role("critic").total_budget_ms / 1000
    answered = next(a for a in critic.attempts if a.outcome == "ok")
    assert answered.started_at - critic.attempts[0].started_at < budget_s
