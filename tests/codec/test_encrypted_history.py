"""With the codec on, what Temporal and Redis hold is ciphertext: workflow history (inputs,
results, activity summaries, failure messages), heartbeat partial text, cached answers; a
worker with the key replays it, the Temporal CLI reads it through the codec server, and a
process without the key fails naming the key id."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.history.v1 import History
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from agent_failover.cli.codec_server import CodecServerSettings, start_codec_server
from agent_failover.codec import ENCODING, PayloadDecryptError, is_encrypted
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.plugin import FailoverPlugin
from agent_failover.stores.cache import SEALED_PREFIX
from agent_failover.testing.harness import build_harness, running
from agent_failover.testing.roles import with_test_roles
from agent_failover.testing.servers import temporal_cli_path
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import RunningSimulator
from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.codec.conftest import codec_with, encrypting_client
from tests.codec.helpers import failures, payloads
from tests.stores.conftest import _delete_namespace

pytestmark = [pytest.mark.devserver, pytest.mark.redis]

SENTINEL = "zebra-canary-4711"
#: Payloads Temporal itself must read: search attributes (the server indexes them) and the
#: SDK's own local-activity bookkeeping (ids, attempt, times; the result is a separate,
#: encrypted detail).
CLEAR_BY_DESIGN = (
    "search_attributes.indexed_fields",
    "marker_recorded_event_attributes.details[data]",
    # workflow.patched() markers: the SDK writes the patch id ({"id": ..., "deprecated": ...})
    # in clear, like its local-activity bookkeeping.
    "marker_recorded_event_attributes.details[patch-data]",
)


@dataclass
class EncryptedRun:
    workflow_id: str
    history: WorkflowHistory
    result: PipelineResult
    redis_values: list[bytes]


@pytest_asyncio.fixture(scope="module")
async def encrypted_run(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator, redis_url: str
) -> AsyncIterator[EncryptedRun]:
    """One pipeline with failovers (primary overloaded), recorded with the codec on (key k1),
    the cache in Redis; the raw history is read by a client without the codec."""
    policy = with_test_roles(
        load_policy(DEFAULT_POLICY_PATH, env={**os.environ, "SIM_URL": simulator.url})
    )
    codec = codec_with("k1")
    client = encrypting_client(dev_env, codec)
    h, workers = build_harness(client, policy, redis_url=redis_url, codec=codec)
    async with SimAdmin(simulator.url) as admin:
        await admin.reset()
        await admin.set_faults("anthropic-us-east", [{"kind": "overloaded"}])
        try:
            async with running(workers):
                wid = f"enc-{uuid.uuid4().hex[:8]}"
                result = await client.execute_workflow(
                    AgentPipelineWorkflow.run,
                    PipelineInput(
                        task=f"Plan the rollout for {SENTINEL}",
                        options=PipelineOptions(escalate_on_critical_degraded=False),
                    ),
                    id=wid,
                    task_queue=h.task_queue,
                    result_type=PipelineResult,
                )
        finally:
            await admin.reset()
    raw = await dev_env.client.get_workflow_handle(wid).fetch_history()
    ns = h.cache.namespace
    r = h.cache._r
    values = [await r.get(k) async for k in r.scan_iter(match=f"{ns}:cache:*")]
    yield EncryptedRun(wid, raw, result, values)
    await h.health.close()
    await h.cache.close()
    await _delete_namespace(redis_url, ns)


def test_history_payloads_are_ciphertext(encrypted_run: EncryptedRun) -> None:
    """Every payload of the run is encrypted except what Temporal must index; the task text
    appears nowhere in the raw history, though the answer (decrypted) echoes it."""
    assert SENTINEL in encrypted_run.result.answer
    assert SENTINEL not in encrypted_run.history.to_json()
    found = payloads(History(events=encrypted_run.history.events))
    clear = [(p, pl) for p, pl in found if not is_encrypted(pl)]
    assert len(found) - len(clear) > 20  # inputs, results, summaries of every step
    assert all(any(part in p for part in CLEAR_BY_DESIGN) for p, _ in clear), clear
    assert all(SENTINEL.encode() not in pl.data for _, pl in clear)


def test_failure_messages_are_encoded(encrypted_run: EncryptedRun) -> None:
    """Failed attempts keep their type (for the UI) but their message and details are sealed."""
    found = failures(History(events=encrypted_run.history.events))
    failed = [f for p, f in found if p.endswith("activity_task_failed_event_attributes.failure")]
    assert failed, "the overloaded primary should have failed at least one attempt"
    for f in failed:
        assert f.message == "Encoded failure" and f.stack_trace == ""
        assert f.encoded_attributes.metadata["encoding"] == ENCODING
        assert f.application_failure_info.type == "overloaded"
        assert all(is_encrypted(d) for d in f.application_failure_info.details.payloads)


def test_redis_cache_holds_ciphertext(encrypted_run: EncryptedRun) -> None:
    """The answers cached for the degraded tier are sealed in Redis, under key id k1."""
    assert encrypted_run.redis_values
    for value in encrypted_run.redis_values:
        assert value.startswith(SEALED_PREFIX) and SENTINEL.encode() not in value
        assert b"k1" in value and b"echo" not in value


async def test_worker_with_the_key_replays_the_encrypted_history(
    encrypted_run: EncryptedRun, policy_path: Path
) -> None:
    """A Replayer carrying FailoverPlugin with the key replays the run; without it, it cannot."""
    plugin = FailoverPlugin(
        policy_path, stores="memory", codec=codec_with("k1", "k2"), include_pipeline=True
    )
    replayer = Replayer(workflows=[], plugins=[plugin])
    ok = await replayer.replay_workflow(encrypted_run.history, raise_on_replay_failure=False)
    assert ok.replay_failure is None, ok.replay_failure
    plain = Replayer(workflows=[AgentPipelineWorkflow], data_converter=pydantic_data_converter)
    bad = await plain.replay_workflow(encrypted_run.history, raise_on_replay_failure=False)
    assert bad.replay_failure is not None


async def test_temporal_cli_decodes_through_the_codec_server(
    encrypted_run: EncryptedRun, dev_env: WorkflowEnvironment
) -> None:
    """`temporal workflow show --codec-endpoint` shows the decrypted input via our server."""
    settings = CodecServerSettings(tokens=("cli-token",))
    server = await start_codec_server(codec_with("k1"), settings, port=0)
    address = dev_env.client.service_client.config.target_host
    base = [temporal_cli_path(), "workflow", "show", "-w", encrypted_run.workflow_id,
            "--address", address, "--output", "json"]  # fmt: skip
    try:
        shown = await asyncio.to_thread(
            subprocess.run,
            [*base, "--codec-endpoint", server.url, "--codec-auth", "Bearer cli-token"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        raw = await asyncio.to_thread(
            subprocess.run, base, capture_output=True, text=True, timeout=60
        )
    finally:
        await server.stop()
    assert shown.returncode == 0, shown.stderr
    decoded = _first_input(shown.stdout)
    assert decoded["metadata"]["encoding"] == "json/plain" and SENTINEL in decoded["data"]
    sealed = _first_input(raw.stdout)
    assert sealed["metadata"]["encoding"] == ENCODING.decode() and SENTINEL not in sealed["data"]


def _first_input(cli_json: str) -> dict:
    """The workflow input payload of `temporal workflow show --output json`, base64 undone."""
    event = json.loads(cli_json)["events"][0]["workflowExecutionStartedEventAttributes"]
    payload = event["input"]["payloads"][0]
    return {
        "metadata": {k: base64.b64decode(v).decode() for k, v in payload["metadata"].items()},
        "data": base64.b64decode(payload["data"]).decode(errors="replace"),
    }


async def test_rotation_and_a_missing_key_through_temporal(
    encrypted_run: EncryptedRun, dev_env: WorkflowEnvironment
) -> None:
    """After rotation (k1 kept, k2 active) the old run's result still decodes; a process with
    only k2 gets an error naming k1."""
    rotated = encrypting_client(dev_env, codec_with("k1", "k2"))
    handle = rotated.get_workflow_handle(encrypted_run.workflow_id, result_type=PipelineResult)
    assert SENTINEL in (await handle.result()).answer
    retired = encrypting_client(dev_env, codec_with("k2"))
    old = retired.get_workflow_handle(encrypted_run.workflow_id, result_type=PipelineResult)
    with pytest.raises(PayloadDecryptError, match="key id 'k1'") as info:
        await old.result()
    assert info.value.key_id == "k1"
