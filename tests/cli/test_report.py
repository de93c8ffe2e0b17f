"""``failover report``: the figures from runs (pure), and the command against real runs."""

from __future__ import annotations

import uuid

import pytest

from agent_failover.cli.report import RunFacts, build_report, parse_since
from agent_failover.resilience.contracts import AgentOutput, AttemptRecord, Capability
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.workflows.models import PipelineInput, PipelineOptions, PipelineResult
from agent_failover.workflows.pipeline import AgentPipelineWorkflow
from tests.cli.conftest import Deployment, assert_one_line_error, invoke


def _out(role: str, tier: int, attempts: list[tuple[str, str, float]], cap=Capability.FULL):
    return AgentOutput(
        role=role,
        content="x",
        capability=cap,
        tier=tier,
        route=attempts[-1][0],
        model="m",
        confidence=0.9,
        attempts=[
            AttemptRecord(route=r, tier=i, started_at=0, outcome=o, latency_ms=ms, ttft_ms=ms / 2)
            for i, (r, o, ms) in enumerate(attempts)
        ],
    )


def test_report_figures_by_role_and_route() -> None:
    """Two planner calls (one failed over after an empty answer), one degraded analyst."""
    runs = [
        RunFacts("a", "AgentPipelineWorkflow", "completed", 1, 1, False, "none", [
            ("planner", _out("planner", 0, [("p", "ok", 100.0)])),
            ("analyst", _out("analyst", 2, [("p", "overloaded", 10.0), ("c", "ok", 300.0)],
                             Capability.DEGRADED)),
        ], ["applied"]),
        RunFacts("b", "AgentPipelineWorkflow", "completed", 1, 1, True, "resolved", [
            ("planner", _out("planner", 1, [("p", "empty_output", 50.0), ("s", "ok", 200.0)])),
        ], ["compensated"]),
    ]  # fmt: skip
    report = build_report(runs)
    assert report.runs == 2
    overview = dict(report.overview)
    assert overview["degraded runs"] == "1 (50%)"
    assert overview["escalations"] == "resolved: 1"
    assert overview["answers below full capability"] == "33%"
    roles = {r[0]: r for r in report.roles}
    # planner: 2 calls, 1 substituted, 0 degraded, depth 1.5, 2 of 3 judged attempts passed
    assert roles["planner"][1:] == ("2", "1 (50%)", "0%", "1.50", "67%")
    assert roles["analyst"][1:] == ("1", "1 (100%)", "100%", "2.00", "100%")
    routes = {r[0]: r for r in report.routes}
    assert routes["p"][1:3] == ("3", "33%") and routes["p"][3] == "100"
    assert "overloaded 1" in routes["p"][8] and "empty_output 1" in routes["p"][8]
    assert dict(report.saga) == {"applied": 1, "compensated": 1}


@pytest.mark.parametrize("text", ["1x", "", "-1h", "0m", "h"])
def test_since_must_be_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="30m, 1h or 2d"):
        parse_since(text)


async def test_bad_since_is_one_error_line() -> None:
    """A window that is not a duration: exit 2 naming the format."""
    result = await invoke(["report", "--since", "yesterday"])
    assert_one_line_error(result, 2, "--since", "1h")


@pytest.mark.devserver
async def test_report_reads_the_window_from_temporal(
    deployment: Deployment, sim_admin: SimAdmin
) -> None:
    """A pipeline whose primary is down, then `failover report --since 1h`: its steps are
    counted, the primary's failures appear by class, the planner was substituted."""
    harness = deployment.harness
    await sim_admin.set_faults("anthropic-us-east", [{"kind": "overloaded"}])
    result: PipelineResult = await harness.client.execute_workflow(
        AgentPipelineWorkflow.run,
        PipelineInput(task=f"report {uuid.uuid4().hex[:6]}", options=PipelineOptions()),
        id=f"pipe-{uuid.uuid4().hex[:10]}",
        task_queue=harness.task_queue,
        result_type=PipelineResult,
    )
    assert result.summary.failover_count > 0
    out = await invoke(
        ["report", "--since", "1h", "--address", deployment.address],
        env={"FAILOVER_CODEC_KEYS": ""},
    )
    assert out.exit_code == 0, out.output
    text = out.output
    assert "by role" in text and "by route" in text
    assert "anthropic-us-east" in text and "overloaded" in text
    planner = next(ln for ln in text.splitlines() if ln.strip().startswith("│ planner"))
    assert "(0%)" not in planner


def test_unreadable_results_are_counted_with_what_to_do() -> None:
    runs = [
        RunFacts("a", "AgentPipelineWorkflow", "completed", 0, 0, False, "none", [
            ("planner", _out("planner", 0, [("p", "ok", 100.0)])),
        ]),
        RunFacts("b", "AgentPipelineWorkflow", "completed", 0, 0, False, unreadable=True),
    ]  # fmt: skip
    overview = dict(build_report(runs).overview)
    assert overview["runs"] == "2"
    assert overview["results not readable here"].startswith("1 (encrypted?")
    assert "FAILOVER_CODEC_KEYS" in overview["results not readable here"]
    assert "results not readable here" not in dict(build_report(runs[:1]).overview)


async def test_an_undecodable_result_does_not_break_the_report() -> None:
    """An encrypted run read without the key (temporalio raises KeyError on the unknown
    encoding) is counted as unreadable; the report goes on."""
    from types import SimpleNamespace

    from temporalio.client import WorkflowExecutionStatus
    from temporalio.common import TypedSearchAttributes

    from agent_failover.cli.report_fetch import _facts

    class Handle:
        async def result(self) -> None:
            raise KeyError("Unknown payload encoding binary/encrypted")

    client = SimpleNamespace(get_workflow_handle=lambda *a, **k: Handle())
    wf = SimpleNamespace(
        id="enc-1",
        run_id="r",
        workflow_type="AgentPipelineWorkflow",
        status=WorkflowExecutionStatus.COMPLETED,
        typed_search_attributes=TypedSearchAttributes.empty,
    )
    facts = await _facts(client, wf)  # type: ignore[arg-type]
    assert facts.unreadable and facts.steps == [] and facts.workflow_id == "enc-1"


@pytest.mark.devserver
async def test_report_covers_a_user_workflow_without_search_attributes(
    deployment: Deployment, sim_admin: SimAdmin
) -> None:
    """A user's own workflow that calls ``resilient_complete`` (no pipeline, no search
    attributes upserted): its call is counted by role and its attempts by route, the
    primary's failure by class (before: both tables empty)."""
    harness = deployment.harness
    await sim_admin.set_faults("anthropic-us-east", [{"kind": "overloaded"}])
    out = await harness.call("plain")
    failed, answered = out.attempts[0], out.attempts[-1]
    assert out.tier > 0 and failed.outcome == "overloaded"
    args = ["report", "--since", "1h", "--task-queue", harness.task_queue]
    result = await invoke([*args, "--address", deployment.address], {"FAILOVER_CODEC_KEYS": ""})
    assert result.exit_code == 0, result.output
    rows = {ln.split("│")[1].strip(): ln for ln in result.output.splitlines() if "│" in ln}
    role = [c.strip() for c in rows["plain"].split("│")[1:-1]]
    assert role[1:3] == ["1", "1 (100%)"]
    assert f"{failed.outcome} 1" in rows[failed.route]
    assert [c.strip() for c in rows[answered.route].split("│")[1:-1]][1:3] == ["1", "100%"]
