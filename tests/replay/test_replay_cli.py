"""``failover replay`` and ``chaos-proxy --record`` refuse bad input before starting
anything: one ``error:`` line naming the folder or the file (and line), exit 2, no
traceback."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import assert_one_line_error, invoke
from tests.replay.helpers import write_cassette


async def test_missing_folder(tmp_path: Path) -> None:
    result = await invoke(["replay", str(tmp_path / "nope")])
    assert_one_line_error(result, 2, str(tmp_path / "nope"), "no such cassette folder")


async def test_folder_without_cassette_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    result = await invoke(["replay", str(tmp_path)])
    assert_one_line_error(result, 2, str(tmp_path), "no cassette files")


async def test_bad_line_names_the_file_and_line(tmp_path: Path) -> None:
    """A truncated exchange (the third line) and a wrong field type are both named."""
    folder = write_cassette(tmp_path / "tape", [])
    path = folder / "test.jsonl"
    path.write_text(path.read_text() + '{"at": 1.0, "request": {"method": "POST"\n')
    result = await invoke(["replay", str(folder)])
    assert_one_line_error(result, 2, f"{path} line 2", "not JSON")
    path.write_text(path.read_text().splitlines()[0] + '\n{"at": "soon"}\n')
    result = await invoke(["replay", str(folder)])
    assert_one_line_error(result, 2, f"{path} line 2", "at")


async def test_not_a_cassette_header(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text('{"hello": 1}\n')
    result = await invoke(["replay", str(tmp_path)])
    assert_one_line_error(result, 2, str(tmp_path / "x.jsonl"), "line 1")


async def test_missing_policy_and_bad_load(tmp_path: Path) -> None:
    from tests.replay.helpers import EXAMPLE

    result = await invoke(["replay", str(EXAMPLE), "--policy", str(tmp_path / "p.yaml")])
    assert_one_line_error(result, 2, "--policy", "p.yaml")
    result = await invoke(["replay", str(EXAMPLE), "--rate", "0"])
    assert_one_line_error(result, 2, "rate_per_s")


async def test_chaos_proxy_needs_a_scenario_or_a_record_folder(tmp_path: Path) -> None:
    result = await invoke(["chaos-proxy", "--upstream", "http://127.0.0.1:9"])
    assert_one_line_error(result, 2, "--scenario", "--record")
    (tmp_path / "file").write_text("")
    result = await invoke(
        ["chaos-proxy", "--upstream", "http://127.0.0.1:9", "--record", str(tmp_path / "file")]
    )
    assert_one_line_error(result, 2, "--record", "not a folder")
