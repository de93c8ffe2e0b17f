"""``resilient_complete`` imports its loop (``workflows.resilient_loop``) on the first call.

Under a sandbox that re-imports our code for each run (the strict replay runner), that
import happens during an activation, where Temporal warns ``Module ... was imported after
initial workflow load`` unless told the import is intended. A workflow task that warns
fails when warnings are errors (as a user's test suite may set): replayed here so.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agent_failover.service import workflow_runner
from tests.workflows.test_patches_replay import REPLAY_WORKFLOWS, fresh_worker_policies

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


@pytest.mark.parametrize("strict", [False, True], ids=["passthrough", "strict-sandbox"])
async def test_the_first_call_loads_the_loop_without_a_sandbox_warning(strict: bool) -> None:
    await fresh_worker_policies()
    path = HISTORIES / "call_hedged.json"
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
    replayer = Replayer(
        workflows=REPLAY_WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(strict=strict),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, str(result.replay_failure)[:300]
