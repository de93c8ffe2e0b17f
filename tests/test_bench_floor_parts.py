"""``bench/floor_parts.py``'s parts: the bare workflow with a context read and a streamed
reply (on a dev server, against the simulator), and the split of the gap."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agent_failover.testing.bare import (
    BareActivities,
    BareCallInput,
    BareCallWorkflow,
    post_messages,
    stream_messages,
)
from agent_failover.testing.sim.server import RunningSimulator
from tests.bench_modules import load_bench

fp = load_bench("floor_parts")

PRIMARY = "anthropic-us-east"


def _input(simulator: RunningSimulator, **kw: object) -> BareCallInput:
    base = simulator.config.endpoint(PRIMARY).base_url(simulator.url)
    return BareCallInput(base_url=base, model="claude-sonnet-4-5", prompt="floor parts", **kw)


async def test_streamed_reply_reads_the_same_text_as_the_json_one(
    simulator: RunningSimulator,
) -> None:
    async with httpx.AsyncClient() as http:
        inp = _input(simulator)
        whole = await post_messages(http, inp)
        streamed = await stream_messages(http, inp.model_copy(update={"stream": True}))
    assert whole
    assert streamed == whole


async def test_bare_workflow_reads_its_context_first(
    dev_env: WorkflowEnvironment, simulator: RunningSimulator
) -> None:
    tq = f"bare-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient() as http:
        acts = BareActivities(http)
        async with Worker(
            dev_env.client,
            task_queue=tq,
            workflows=[BareCallWorkflow],
            activities=[acts.call, acts.context],
        ):
            inp = _input(simulator, context_bytes=300, stream=True)
            wf_id = f"bare-ctx-{uuid.uuid4().hex[:8]}"
            text = await dev_env.client.execute_workflow(
                BareCallWorkflow.run, inp, id=wf_id, task_queue=tq, result_type=str
            )
            hist = await dev_env.client.get_workflow_handle(wf_id).fetch_history()
    assert text
    markers = [e for e in hist.events if e.HasField("marker_recorded_event_attributes")]
    assert len(markers) == 1
    result = markers[0].marker_recorded_event_attributes.details["result"].payloads[0]
    assert len(result.data) == 300


def _arm(cpu16: float) -> dict[str, float]:
    return {"cpu_ms_per_call_c16": cpu16}


def test_gap_splits_failover_minus_bare_into_context_streaming_and_the_rest() -> None:
    res = {
        "bare": _arm(10.0),
        "bare-context": _arm(12.5),
        "bare-stream": _arm(11.0),
        "bare-context-stream": _arm(13.25),
        "failover": _arm(14.0),
    }
    got = fp.gap(res, 16)
    assert got == {
        "failover_minus_bare": 4.0,
        "context_read": 2.5,
        "streaming": 1.0,
        "both_together": 3.25,
        "rest_agent_failover_own": 0.5,
    }


@pytest.mark.parametrize("size", [8, 175, 4096])
async def test_context_activity_returns_exactly_its_size(size: int) -> None:
    async with httpx.AsyncClient() as http:
        got = await BareActivities(http).context(size)
    assert len(json.dumps(got, separators=(",", ":"))) == size


def test_child_cpu_reads_a_busy_childs_seconds() -> None:
    import subprocess
    import sys
    import time

    run_facts = load_bench("run_facts")
    code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    code += "time.sleep(30)  # floor-parts-busy-marker"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        probe = run_facts.ChildCPU({"busy": "floor-parts-busy-marker", "none": "no-such-child"})
        deadline = time.monotonic() + 10
        seconds = probe.seconds()
        while (seconds["busy"] or 0.0) < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
            seconds = probe.seconds()
    finally:
        child.kill()
        child.wait()
    assert seconds["none"] is None
    assert seconds["busy"] is not None and 0.25 <= seconds["busy"] < 5


def test_the_floors_input_is_unchanged_by_the_switches_when_they_are_off() -> None:
    from pydantic_core import to_json

    off = BareCallInput(base_url="http://x", model="m", prompt="p")
    on = off.model_copy(update={"context_bytes": 64, "stream": True})
    assert b"context_bytes" not in to_json(off) and b"stream" not in to_json(off)
    back = BareCallInput.model_validate_json(to_json(on))
    assert (back.context_bytes, back.stream) == (64, True)
