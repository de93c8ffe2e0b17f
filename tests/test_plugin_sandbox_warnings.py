"""A user's worker starts clean: a plugin worker running a user's workflow that calls
``resilient_complete`` emits no workflow-sandbox warning (``Module X was imported after
initial workflow load``, ``... not intentionally passed through``), so it runs under
``-W error``.

The worker runs in a fresh process, as a user's does: nothing of ours is imported before
the worker starts, so every module our code needs is first imported on the sandbox's
watch. The user's workflow imports a public submodule lazily inside ``run``, as workflow
code may: passed through, it is imported outside the sandbox and says nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_failover.config import DEFAULT_POLICY_PATH

USER_WORKFLOW = """
from temporalio import workflow

from agent_failover import CallOptions, ChatRequest, Message, resilient_complete


@workflow.defn
class TriageTicket:
    @workflow.run
    async def run(self, text: str) -> str:
        from agent_failover.visibility import upsert_failover_search_attributes

        out = await resilient_complete(
            "analyst",
            ChatRequest(messages=[Message(role="user", content=text)]),
            options=CallOptions(deadline_ms=8000),
        )
        upsert_failover_search_attributes([out])
        return out.content
"""

WORKER = """
import asyncio, json, logging, os, sys, uuid, warnings

SANDBOX = ("was imported after initial workflow load", "intentionally passed through")
logged = []


class Capture(logging.Handler):
    def emit(self, record):
        if any(s in record.getMessage() for s in SANDBOX):
            logged.append(record.getMessage())


logging.getLogger().addHandler(Capture())


async def main():
    from agent_failover.testing import start_simulator
    from agent_failover.testing.servers import start_time_skipping

    sim = await start_simulator(port=0)
    os.environ["SIM_URL"] = sim.url
    env = await start_time_skipping()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # every warning recorded: what -W error would raise
        from temporalio.worker import Worker

        from agent_failover import FailoverPlugin
        from user_workflow import TriageTicket

        plugin = FailoverPlugin(sys.argv[1], stores="memory", start_monitor=False, codec=False)
        try:
            async with Worker(env.client, task_queue="my-app", workflows=[TriageTicket],
                              plugins=[plugin]):
                answer = await asyncio.wait_for(env.client.execute_workflow(
                    TriageTicket.run, "hello", id=f"t-{uuid.uuid4().hex}", task_queue="my-app"
                ), 40)
        finally:
            await plugin.aclose()
            await env.shutdown()
            await sim.stop()
    warned = [f"{w.category.__name__}: {w.message}" for w in seen]
    print(json.dumps({"answered": bool(answer), "warnings": warned, "logged": logged}))


asyncio.run(main())
"""


@pytest.mark.timeout(90)
def test_a_users_plugin_worker_emits_no_sandbox_warning(tmp_path: Path) -> None:
    (tmp_path / "user_workflow.py").write_text(textwrap.dedent(USER_WORKFLOW))
    (tmp_path / "worker.py").write_text(textwrap.dedent(WORKER))
    proc = subprocess.run(
        [sys.executable, "worker.py", str(DEFAULT_POLICY_PATH)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=70,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["answered"]
    assert out["logged"] == [], out
    assert out["warnings"] == [], out  # nothing else either: the worker runs under -W error
