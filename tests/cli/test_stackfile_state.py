"""Each demo starts from clean state: the previous run's Temporal database is deleted
unless --keep-state; the dev server never touches another stack's database."""

from __future__ import annotations

import gc
import uuid
from pathlib import Path

import pytest
from temporalio.service import RPCError, RPCStatusCode
from typer.testing import CliRunner

from agent_failover.cli import demo as demo_module
from agent_failover.cli.devstack import clean_state, start_stack
from agent_failover.cli.main import app
from agent_failover.testing.servers import free_port


def test_clean_state_removes_the_database_and_its_side_files(tmp_path: Path) -> None:
    db = tmp_path / "temporal.db"
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        p.write_text("x")
    (tmp_path / "stack.json").write_text("{}")
    assert sorted(p.name for p in clean_state(db)) == [
        "temporal.db",
        "temporal.db-shm",
        "temporal.db-wal",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["stack.json"]


@pytest.mark.parametrize(("flags", "clean"), [([], True), (["--keep-state"], False)])
def test_demo_cleans_by_default(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], clean: bool
) -> None:
    seen: dict[str, object] = {}

    async def fake_run_demo(console, **kw):  # the real one takes a minute
        seen.update(kw)
        return 0

    monkeypatch.setattr(demo_module, "run_demo", fake_run_demo)
    result = CliRunner().invoke(app, ["demo", *flags])
    assert result.exit_code == 0, result.output
    assert seen["clean"] is clean


@pytest.mark.devserver
async def test_a_clean_stack_forgets_the_previous_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow left by the previous stack is there with clean=False, gone with True."""
    monkeypatch.setenv("FAILOVER_STATE_DIR", str(tmp_path))
    marker = f"earlier-{uuid.uuid4().hex[:8]}"

    async def stack(clean: bool):
        # The previous stack's garbage finalized inside the next one's sandbox validation
        # fails it with KeyError <thread id> (temporalio/sdk-python#585): collect it first,
        # as the autouse fixture does before each test.
        gc.collect()
        return await start_stack(
            temporal_port=free_port(), ui=False, clean=clean, monitor=False, persist=True,
            namespace=f"state-{uuid.uuid4().hex[:8]}", task_queue=f"state-{uuid.uuid4().hex[:8]}",
        )  # fmt: skip

    first = await stack(clean=True)
    try:
        await first.client.start_workflow("Nothing", id=marker, task_queue="nobody-polls")
    finally:
        await first.stop()
    kept = await stack(clean=False)
    try:
        assert (await kept.client.get_workflow_handle(marker).describe()).id == marker
    finally:
        await kept.stop()
    fresh = await stack(clean=True)
    try:
        with pytest.raises(RPCError) as exc:
            await fresh.client.get_workflow_handle(marker).describe()
        assert exc.value.status is RPCStatusCode.NOT_FOUND
    finally:
        await fresh.stop()
