"""`failover escalations list|show` against the dev server: pending runs oldest first, one
run's state readable (and as JSON), clear errors for runs with nothing to show."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.service import RPCError

from agent_failover.cli.escalations import PENDING_QUERY, visibility_error
from agent_failover.testing.harness import make_harness, running
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import (
    EscalationState,
    PipelineInput,
    PipelineOptions,
    PipelineStatus,
)
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.cli.conftest import Deployment, address_of, assert_one_line_error, invoke

pytestmark = pytest.mark.devserver
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
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


async def test_show_unknown_and_never_escalated(deployment: Deployment) -> None:
    """An unknown id, and a workflow that never escalated, each get one clear line."""
    args = ["--address", deployment.address]
    nope = await invoke(["escalations", "show", "pipeline-nope", *args])
    assert_one_line_error(nope, 1, "no workflow 'pipeline-nope'")
    monitor = f"{deployment.task_queue}-health-monitor"
    other = await invoke(["escalations", "show", monitor, *args])
    assert_one_line_error(other, 1, "HealthMonitorWorkflow that has never escalated")


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


async def test_a_user_workflow_is_listed_shown_and_resolved(
    dev_env, policy, sim_admin: SimAdmin
) -> None:
    """A workflow of the user's own that calls escalate() (the escalating-review example)
    is listed, shown with its type and the state it kept, and resolved like a pipeline
    (before: list and show filtered on the pipeline's type, resolve refused any other)."""
    sys.path.insert(0, str(EXAMPLES / "escalating_review"))
    from review_workflows import ChangeReviewWorkflow, ReviewInput, ReviewResult

    for ep in ALL:
        await sim_admin.set_faults(ep, [{"kind": "auth_error"}])
    h, workers = await make_harness(dev_env.client, policy, workflows=[ChangeReviewWorkflow])
    args = ["--address", address_of(dev_env)]
    async with running(workers):
        handle = await h.client.start_workflow(
            ChangeReviewWorkflow.run,
            ReviewInput(change="Rename the orders table", role="critic"),
            id=f"review-{uuid.uuid4().hex[:8]}",
            task_queue=h.task_queue,
            result_type=ReviewResult,
        )
        try:
            deadline = time.monotonic() + 30
            while True:  # the pause, then visibility, are eventually there
                listed = await invoke(["escalations", "list", *args])
                assert listed.exit_code == 0, listed.output
                if handle.id in listed.output:
                    break
                assert time.monotonic() < deadline, listed.output
                await asyncio.sleep(0.3)
            shown = await invoke(["escalations", "show", handle.id, *args])
            assert shown.exit_code == 0, shown.output
            for fragment in (
                "ChangeReviewWorkflow",
                "static_fallback",
                "Rename the orders table",
                f"failover resolve {handle.id} accept_degraded",
            ):
                assert fragment in shown.output, shown.output
            ok = await invoke(["resolve", handle.id, "accept_degraded", *args])
            assert ok.exit_code == 0, ok.output
            assert "accepted for step review (role critic)" in ok.output
            result = await handle.result()
        finally:
            with contextlib.suppress(RPCError):
                await handle.terminate()
    assert result.decision == "accept_degraded"
