"""Screenshots of a degraded pipeline's Temporal UI page with headless Chromium.

Not part of the test suite (it needs Debian's ``chromium``: ``apt-get install chromium``).
Starts the dev stack on free ports (simulator, Temporal with its Web UI, Redis, workers),
takes the primary route down, runs one pipeline to completion and saves the UI page of
that run, where the static summary and the current details (the markdown step table)
show::

    .venv/bin/python docs/capture_ui.py            # writes docs/ui-degraded-run.png
    .venv/bin/python docs/capture_ui.py --out /tmp/run.png --width 1600 --height 2000
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Milliseconds of virtual time Chromium gives the UI's scripts to fetch and render.
RENDER_BUDGET_MS = 15_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("error: no chromium on PATH (Debian: apt-get install chromium)")


async def _degraded_run(args: argparse.Namespace) -> tuple[str, str]:
    """Start the stack, run one pipeline with its primary down, shoot its page; return
    (page URL, PNG path)."""
    task = args.task
    from agent_failover.cli.devstack import start_stack
    from agent_failover.testing.sim.admin import SimAdmin
    from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
    from agent_failover.workflows.pipeline import AgentPipelineWorkflow
    from agent_failover.workflows.search_attributes import pipeline_summary

    port = _free_port()
    # A namespace of its own in Redis: no breaker state from other runs, none left to them.
    stack = await start_stack(
        temporal_port=port,
        ui_port=_free_port(),
        persist=False,
        monitor=False,
        namespace=f"capture-{uuid.uuid4().hex[:8]}",
    )
    try:
        admin = SimAdmin(stack.sim.url)
        # Claude down everywhere and GPT-4.1 throttled: answers come from tier 2 (degraded).
        for route in ("anthropic-us-east", "anthropic-eu-west", "bedrock-us-west-2"):
            await admin.set_faults(route, [{"kind": "overloaded"}])
        await admin.set_faults("vertex-europe-west1", [{"kind": "server_error"}])
        await admin.set_faults("openai-us", [{"kind": "rate_limit", "retry_after": 60}])
        wid = f"degraded-{uuid.uuid4().hex[:8]}"
        handle = await stack.client.start_workflow(
            AgentPipelineWorkflow.run,
            PipelineInput(task=task, options=PipelineOptions(revision_rounds=0)),
            id=wid,
            task_queue=stack.task_queue,
            result_type=PipelineResult,
            static_summary=pipeline_summary(task),
        )
        result = await handle.result()
        print(f"run {wid}: worst tier {result.summary.worst_tier}, "
              f"{result.summary.failover_count} failover(s)")  # fmt: skip
        base = f"{stack.ui}/namespaces/default/workflows/{wid}/{handle.result_run_id}"
        # The "User Metadata" tab: the static summary and the current details.
        url = f"{base}/{args.tab}"
        shot = await asyncio.to_thread(_shoot, url, args.out, args.width, args.height)
        return url, shot
    finally:
        await stack.stop()


def _shoot(url: str, out: Path, width: int, height: int) -> str:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--virtual-time-budget={RENDER_BUDGET_MS}",
            f"--screenshot={out}",
            url,
        ]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return str(out)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=HERE / "ui-degraded-run.png")
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1000)
    p.add_argument("--tab", default="user-metadata", help="history, timeline, user-metadata...")
    p.add_argument("--task", default="Compare two queue designs for the billing service")
    return p.parse_args()


if __name__ == "__main__":
    page, png = asyncio.run(_degraded_run(_args()))
    print(f"{page}\n-> {png}")
