"""`failover escalations list|show` against the dev server: pending runs oldest first, one
run's state readable (and as JSON), clear errors for runs with nothing to show."""

from __future__ import annotations

import asyncio
import io
import json
import time
import uuid

import pytest
from temporalio import workflow
from temporalio.service import RPCError
from temporalio.worker import Worker

from agent_failover.cli.escalations import PENDING_QUERY, visibility_error
from agent_failover.plugin import with_passthrough
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.visibility import upsert_failover_search_attributes
from agent_failover.workflows.models import (
    EscalationState,
    PipelineInput,
    PipelineOptions,
    PipelineStatus,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.cli.conftest import Deployment, assert_one_line_error, invoke

pytestmark = pytest.mark.devserver
ALL = [
    "anthropic-us-east", "anthropic-eu-west", "bedrock-us-west-2", "vertex-europe-west1",
    "openai-us", "cheap-mini", "gemini-flash",
]  # fmt: skip


async def _paused(d: Deployment, prefix: str):
    handle = await d.harness.client.start_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task="wait for a human", options=PipelineOptions(revision_rounds=0)),
        id=f"{prefix}-{uuid.uuid4().hex[:8]}",
        task_queue=d.task_queue,
    )
    deadline = time.monotonic() + 20
    while True:
        st = await handle.query(AgentPipelineWorkflow.status, result_type=PipelineStatus)
        if st.escalation is EscalationState.PENDING:
            return handle
        assert time.monotonic() < deadline, "never paused"
        await asyncio.sleep(0.1)


async def test_list_and_show_pending_escalations(
    deployment: Deployment, sim_admin: SimAdmin
) -> None:
    """Two paused runs are listed oldest first with their blocked step and reason; `show`
    prints the reason, blocked steps and every resolve command; `--json` the raw state."""
    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    first = await _paused(deployment, "esc-a")
    second = await _paused(deployment, "esc-b")
    args = ["--address", deployment.address]
    try:
        deadline = time.monotonic() + 15
        while True:  # visibility is eventually consistent
            listed = await invoke(["escalations", "list", *args])
            assert listed.exit_code == 0, listed.output
            if first.id in listed.output and second.id in listed.output:
                break
            assert time.monotonic() < deadline, listed.output
            await asyncio.sleep(0.3)
        out = listed.output
        assert out.index(first.id) < out.index(second.id), "not oldest first"
        assert "planner" in out and "static" in out

        shown = await invoke(["escalations", "show", first.id, *args])
        assert shown.exit_code == 0, shown.output
        for fragment in (
            "reason",
            "blocked steps",
            "static_fallback",
            f"failover resolve {first.id} accept_degraded",
            f"failover resolve {first.id} provide_output --output TEXT",
            f"failover resolve {first.id} abort",
        ):
            assert fragment in shown.output, shown.output

        raw = await invoke(["escalations", "show", first.id, "--json", *args])
        assert raw.exit_code == 0, raw.output
        state = json.loads(raw.stdout)
        assert state["step"] == "planner" and state["blocked_steps"][0]["role"] == "planner"

        ok = await invoke(["resolve", first.id, "accept_degraded", *args])
        assert ok.exit_code == 0, ok.output
        await first.result()
        done = await invoke(["escalations", "show", first.id, *args])
        assert_one_line_error(done, 1, first.id, "already finished")
    finally:
        for h in (first, second):
            try:
                await h.terminate()
            except RPCError:
                pass  # already finished


@workflow.defn(sandboxed=False)
class WaitsForAHuman:
    """A user's own workflow that marks itself as waiting for a human and waits."""

    @workflow.run
    async def run(self) -> None:
        upsert_failover_search_attributes([], escalation_state="pending")
        await workflow.wait_condition(lambda: False)


async def test_list_shows_a_user_workflow_waiting_for_a_human(dev_env) -> None:
    """A workflow that is not our pipeline but marked itself pending is listed, by its
    type (before: only AgentPipelineWorkflow runs were looked for)."""
    queue = f"own-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        dev_env.client, task_queue=queue, workflows=[WaitsForAHuman],
        workflow_runner=with_passthrough(None),
    )  # fmt: skip
    async with worker:
        handle = await dev_env.client.start_workflow(
            WaitsForAHuman.run, id=f"own-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        try:
            address = dev_env.client.service_client.config.target_host
            args = ["escalations", "list", "--task-queue", queue, "--address", address]
            deadline = time.monotonic() + 15
            while True:
                result = await invoke(args)
                assert result.exit_code == 0, result.output
                if handle.id in result.output or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.3)
            assert handle.id in result.output and "WaitsForAHuman" in result.output
        finally:
            await handle.terminate()


async def test_show_unknown_and_not_a_pipeline(deployment: Deployment) -> None:
    """An unknown id, and a workflow that is not a pipeline, each get one clear line."""
    args = ["--address", deployment.address]
    nope = await invoke(["escalations", "show", "pipeline-nope", *args])
    assert_one_line_error(nope, 1, "no workflow 'pipeline-nope'")
    monitor = f"{deployment.task_queue}-health-monitor"
    other = await invoke(["escalations", "show", monitor, *args])
    assert_one_line_error(other, 1, "not a pipeline")


async def test_an_unregistered_attribute_names_the_fix(dev_env) -> None:
    """The server's refusal of an unknown attribute becomes "register it" with the command."""
    query = PENDING_QUERY.replace("EscalationState", "EscalationStateUnregistered")
    with pytest.raises(RPCError) as info:
        async for _ in dev_env.client.list_workflows(query):
            pass
    msg = visibility_error(info.value, "default").message
    assert "has no EscalationState search attribute" in msg
    assert "temporal operator search-attribute create --name EscalationState" in msg


@pytest.mark.parametrize(
    "args", [["escalations", "list"], ["escalations", "show"], ["webhook-receiver"]]
)
async def test_new_commands_have_help(args: list[str]) -> None:
    """`--help` exits 0 and says what the command does."""
    result = await invoke([*args, "--help"])
    assert result.exit_code == 0 and "Usage" in result.output, result.output


async def test_webhook_receiver_command_prints_and_verifies() -> None:
    """`failover webhook-receiver --port 0` announces its URL, prints a signed notification
    as verified, refuses an unsigned one with 401, and stops on SIGTERM (exit 0)."""
    import re

    import httpx

    from agent_failover.resilience.notify import SIGNATURE_HEADER, sign
    from tests.cli.conftest import FAILOVER, cli_env

    env = cli_env(FAILOVER_ESCALATION_WEBHOOK_SECRET="k", COLUMNS="400")
    proc = await asyncio.create_subprocess_exec(
        FAILOVER,
        "webhook-receiver",
        "--port",
        "0",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        first = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        found = re.search(r"http://127\.0\.0\.1:\d+/", first)
        assert found and "checking signatures" in first, first
        body = json.dumps(
            {"event": "escalation.opened", "workflow_id": "w-1", "round": 1, "reason": "why"}
        ).encode()
        signed = {SIGNATURE_HEADER: sign("k", body, int(time.time()))}
        async with httpx.AsyncClient() as http:
            ok = await http.post(found.group(0), content=body, headers=signed)
            bad = await http.post(found.group(0), content=body)
        assert (ok.status_code, bad.status_code) == (200, 401)
    finally:
        proc.terminate()
        out_b, err_b = await asyncio.wait_for(proc.communicate(), 20)
    out, err = out_b.decode(), err_b.decode()
    assert "escalation.opened w-1 round 1: why (signature ok)" in out, out + err
    assert "REFUSED: no X-Failover-Signature header" in out, out + err
    assert proc.returncode == 0, err


def test_demo_on_call_check_fails_without_a_resolved_page() -> None:
    """The demo's self-check: an escalation paged but never closed, or a refused signature,
    fails it; opened and resolved for every run passes."""
    from rich.console import Console

    from agent_failover.cli.demo_webhook import OnCall
    from agent_failover.testing.webhook_receiver import Received, WebhookReceiver

    def got(event: str, verified: bool = True, status: int = 200) -> Received:
        return Received(status, {"event": event, "workflow_id": "w"}, "d", verified)

    console = Console(file=io.StringIO())
    rx = WebhookReceiver("k")
    assert not OnCall(rx).check(console)  # nothing paged at all
    rx.received = [got("escalation.opened")]
    assert not OnCall(rx).check(console)
    rx.received.append(got("escalation.resolved"))
    assert OnCall(rx).check(console)
    rx.received.append(got("escalation.opened", verified=False, status=401))
    assert not OnCall(rx).check(console)
