"""The codec on a live worker: heartbeat partial text is ciphertext, the plugin refuses a
worker whose client would write clear history, connect_client follows the environment, and
a worker without the key says which key it needs."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agent_failover.codec import META_KEY_ID, generate_key, is_encrypted
from agent_failover.connect import connect_client
from agent_failover.plugin import FailoverPlugin
from agent_failover.resilience.config import PolicyConfig
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.testing.harness import build_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from tests.codec.conftest import codec_with, encrypting_client
from tests.workflows.helpers import CallInput, ResilientCallWorkflow

pytestmark = pytest.mark.devserver


async def _heartbeat_details(env: WorkflowEnvironment, wid: str) -> list:
    """The pending call_model activity's last heartbeat payloads, read without the codec."""
    desc = await env.client.get_workflow_handle(wid).describe()
    pending = desc.raw_description.pending_activities
    return [p for a in pending for p in a.heartbeat_details.payloads]


async def test_heartbeat_partial_text_is_ciphertext(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, sim_admin: SimAdmin
) -> None:
    """A slow stream heartbeats its partial text; Temporal holds it encrypted (key k2), and
    the key opens it to the streamed tokens."""
    codec = codec_with("k2")
    client = encrypting_client(dev_env, codec)
    await sim_admin.set_faults("anthropic-us-east", [{"kind": "tokens_per_sec", "rate": 4}])
    h, workers = build_harness(client, policy, codec=codec)
    wid = f"hb-{uuid.uuid4().hex[:8]}"
    request = ChatRequest(messages=[Message(role="user", content="stream slowly")], max_tokens=80)
    async with running(workers):
        handle = await client.start_workflow(
            ResilientCallWorkflow.run,
            CallInput(role="plain", request=request),
            id=wid,
            task_queue=h.task_queue,
        )
        try:
            beat = None
            for _ in range(150):  # heartbeats after the first are throttled to ~4 s
                details = await _heartbeat_details(dev_env, wid)
                opened = await codec.decode(details)
                if opened and json.loads(opened[0].data)["tokens"] > 0:
                    beat = (details[0], json.loads(opened[0].data))
                    break
                await asyncio.sleep(0.1)
        finally:
            await handle.terminate()
    assert beat is not None, "no heartbeat with partial text arrived"
    sealed, plain = beat
    assert is_encrypted(sealed) and sealed.metadata[META_KEY_ID] == b"k2"
    assert plain["partial"].startswith("[echo:")
    assert plain["partial"].encode() not in sealed.data and b"echo" not in sealed.data


async def test_plugin_refuses_a_client_without_the_codec(
    dev_env: WorkflowEnvironment, policy: PolicyConfig
) -> None:
    """Codec on but the worker's client has none: the worker is not built (history would be
    clear text); with an encrypting client it is."""
    plugin = FailoverPlugin(policy, stores="memory", codec=codec_with("k1"))
    with pytest.raises(ValueError, match="history would be clear text"):
        Worker(dev_env.client, task_queue="tq-plain", plugins=[plugin])
    Worker(encrypting_client(dev_env, codec_with("k1")), task_queue="tq-enc", plugins=[plugin])


async def test_connect_client_takes_the_codec_from_the_environment(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FAILOVER_CODEC_KEYS set: the client encrypts (failures too); unset or False: it does not."""
    address = dev_env.client.service_client.config.target_host
    monkeypatch.setenv("FAILOVER_CODEC_KEYS", f"ops-2025:{generate_key()}")
    client = await connect_client(address)
    conv = client.data_converter
    assert conv.payload_codec is not None and conv.payload_codec.active_key_id == "ops-2025"
    assert conv.failure_converter_class.__name__ == "DefaultFailureConverterWithEncodedAttributes"
    assert (await connect_client(address, codec=False)).data_converter.payload_codec is None
    monkeypatch.delenv("FAILOVER_CODEC_KEYS")
    assert (await connect_client(address)).data_converter.payload_codec is None


async def test_worker_without_the_key_fails_the_task_naming_the_key(
    dev_env: WorkflowEnvironment, policy: PolicyConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker lacking the key a workflow's input was encrypted with fails its workflow task
    with type PayloadDecryptError (retried until a worker with the key takes it) and logs
    which key id it needs."""
    h, workers = build_harness(encrypting_client(dev_env, codec_with("k2")), policy)
    sender = encrypting_client(dev_env, codec_with("k1"))
    request = ChatRequest(messages=[Message(role="user", content="needs k1")])
    wid = f"nokey-{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.ERROR, logger="temporalio.worker._workflow"):
        async with running(workers):
            handle = await sender.start_workflow(
                ResilientCallWorkflow.run,
                CallInput(role="plain", request=request),
                id=wid,
                task_queue=h.task_queue,
            )
            try:
                failed = None
                for _ in range(100):
                    failed = await _first_task_failure(dev_env, wid)
                    if failed is not None:
                        break
                    await asyncio.sleep(0.1)
            finally:
                await handle.terminate()
    assert failed is not None and failed.application_failure_info.type == "PayloadDecryptError"
    assert "key id 'k1', which this process does not have (it has: k2)" in caplog.text


async def _first_task_failure(env: WorkflowEnvironment, wid: str):
    history = await env.client.get_workflow_handle(wid).fetch_history()
    for e in history.events:
        if e.HasField("workflow_task_failed_event_attributes"):
            return e.workflow_task_failed_event_attributes.failure
    return None
