"""API keys never leave the worker's environment: a full pipeline, with sentinel keys in the
variables the policy names, against a simulator that requires keys (so they are sent) and
one provider that echoes the key in its error message (OpenAI's 401 does). Neither workflow history
(pipeline and health monitor, read as raw bytes with the codec off), nor the worker's
debug log, nor Redis holds any key value."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from temporalio.api.history.v1 import History
from temporalio.testing import WorkflowEnvironment

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.stores.redis_link import fail_fast_client
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.config import load_sim_config
from agent_failover.testing.sim.server import RunningSimulator, start_simulator
from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
from agent_failover.workflows.monitor import monitor_workflow_id
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.deploy.procs import start_worker
from tests.stores.conftest import _delete_namespace

pytestmark = [pytest.mark.devserver, pytest.mark.redis]

KEY_ENV = {
    "anthropic-us-east": "ANTHROPIC_API_KEY",
    "anthropic-eu-west": "ANTHROPIC_API_KEY",
    "openai-us": "OPENAI_API_KEY",
    "cheap-mini": "MISTRAL_API_KEY",
    "gemini-flash": "GEMINI_API_KEY",
}


@pytest_asyncio.fixture
async def auth_sim() -> AsyncIterator[RunningSimulator]:
    """A simulator that answers 401 to any request without its provider's key header."""
    config = load_sim_config().model_copy(update={"require_auth": True})
    sim = await start_simulator(port=0, config=config)
    yield sim
    await sim.stop()


def _policy_naming_keys(tmp_path: Path) -> Path:
    doc = yaml.safe_load(Path(DEFAULT_POLICY_PATH).read_text())
    for name, var in KEY_ENV.items():
        doc["endpoints"][name]["api_key_env"] = var
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


async def _redis_dump(redis_url: str, namespace: str) -> bytes:
    r = fail_fast_client(redis_url)
    try:
        out = b""
        async for key in r.scan_iter(match=f"{namespace}:*"):
            kind = (await r.type(key)).decode()
            value = {
                "string": r.get,
                "hash": r.hgetall,
                "list": lambda k: r.lrange(k, 0, -1),
                "zset": lambda k: r.zrange(k, 0, -1, withscores=True),
                "set": r.smembers,
            }[kind]
            out += key + b"=" + repr(await value(key)).encode() + b"\n"
        return out
    finally:
        await r.aclose()


async def test_no_key_value_in_history_logs_or_redis(
    dev_env: WorkflowEnvironment, auth_sim: RunningSimulator, redis_url: str, tmp_path: Path
) -> None:
    """Sentinel keys are sent to providers yet appear nowhere Temporal, logs or Redis keep."""
    run = uuid.uuid4().hex[:8]
    keys = {var: f"sk-SENTINEL-{var.split('_')[0].lower()}-{run}" for var in KEY_ENV.values()}
    tq = f"secrets-{run}"
    env = {
        **keys,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "SIM_URL": auth_sim.url,
        "FAILOVER_POLICY": str(_policy_naming_keys(tmp_path)),
        "REDIS_URL": redis_url,
        "FAILOVER_REDIS_NAMESPACE": tq,
        "FAILOVER_TASK_QUEUE": tq,
        "FAILOVER_CODEC_KEYS": "",  # off: prove keys never enter payloads, not just that
        "LOG_LEVEL": "DEBUG",  # they are encrypted there
    }
    async with SimAdmin(auth_sim.url) as admin:
        for down in ("anthropic-us-east", "anthropic-eu-west"):
            await admin.set_faults(down, [{"kind": "overloaded"}])
        # A server error is retried, then failed over, without opening the breaker at
        # once (a 401 would, and the monitor's first probe would then hide the route from
        # the pipeline), so the echoed key reaches a call_model failure in history.
        echo = f"upstream rejected key {keys['OPENAI_API_KEY']} (request logged)"
        await admin.set_faults(
            "openai-us", [{"kind": "http_error", "status": 500, "message": echo}]
        )
        worker = await start_worker("worker", env, tmp_path)
        try:
            wid, result = await _run_pipeline(dev_env, tq)
            attempts = await admin.attempts()
        finally:
            code = await worker.stop()
    try:
        assert code == 0 and result.summary.worst_tier == 2, worker.output()[-3000:]
        _assert_keys_were_sent(attempts)
        histories = await _histories(dev_env, [wid, monitor_workflow_id(tq)])
        assert b"[redacted]" in histories  # the echoed key was masked, not dropped silently
        stores = await _redis_dump(redis_url, tq)
        assert stores  # breaker state and cached answers were written
        log = worker.output()
        assert "HTTP Request: POST" in log  # the debug log saw every call
        for var, value in keys.items():
            assert value.encode() not in histories, f"{var} in history"
            assert value not in log, f"{var} in the worker log"
            assert value.encode() not in stores, f"{var} in Redis"
    finally:
        await dev_env.client.get_workflow_handle(monitor_workflow_id(tq)).terminate()
        await _delete_namespace(redis_url, tq)


async def _run_pipeline(env: WorkflowEnvironment, tq: str) -> tuple[str, PipelineResult]:
    wid = f"secrets-{uuid.uuid4().hex[:8]}"
    result = await env.client.execute_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(
            task="Compare two ledgers",
            options=PipelineOptions(escalate_on_critical_degraded=False),
        ),
        id=wid,
        task_queue=tq,
        result_type=PipelineResult,
    )
    return wid, result


def _assert_keys_were_sent(attempts: list[dict]) -> None:
    """The simulator requires keys: tier-2 answers (200) prove they were sent; openai-us was
    tried and answered its echoing 500."""
    by_route: dict[str, set[int]] = {}
    for a in attempts:
        by_route.setdefault(a["endpoint"], set()).add(a["status"])
    assert 500 in by_route.get("openai-us", set())
    assert 401 not in {status for statuses in by_route.values() for status in statuses}
    assert 200 in by_route.get("cheap-mini", set()) | by_route.get("gemini-flash", set())


async def _histories(env: WorkflowEnvironment, workflow_ids: list[str]) -> bytes:
    """The raw bytes of each workflow's history (payloads un-encoded, not base64)."""
    out = b""
    for wid in workflow_ids:
        history = await env.client.get_workflow_handle(wid).fetch_history()
        out += History(events=history.events).SerializeToString()
    return out
