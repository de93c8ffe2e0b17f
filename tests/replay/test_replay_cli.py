"""``failover replay`` and ``chaos-proxy --record`` refuse bad input before starting
anything: one ``error:`` line naming the folder or the file (and line), exit 2, no
traceback; ``chaos-proxy --record`` as a real process writes a redacted cassette."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from pathlib import Path

import httpx

from agent_failover.testing.replay import load_cassette
from agent_failover.testing.sim.server import RunningSimulator
from tests.cli.conftest import FAILOVER, assert_one_line_error, invoke
from tests.cli.test_chaos_proxy_cli import _read_until
from tests.replay.helpers import write_cassette

SENTINEL = "SENTINEL-c0ffee1234"


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


async def test_record_as_a_real_process(simulator: RunningSimulator, tmp_path: Path) -> None:
    """``failover chaos-proxy --record DIR`` in front of the simulator: the exchange is in
    the cassette (status, streaming, chunks), the sentinel key is not, SIGTERM says how
    many exchanges were recorded."""
    proc = await asyncio.create_subprocess_exec(
        FAILOVER, "chaos-proxy", "--upstream", simulator.url, "--record", str(tmp_path),
        "--port", "0", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out: list[str] = []
    try:
        line = await _read_until(proc.stdout, "listening on", out)  # type: ignore[arg-type]
        url = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)  # type: ignore[union-attr]
        body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "stream": True,
                "messages": [{"role": "user", "content": f"hi {SENTINEL}"}]}  # fmt: skip
        async with httpx.AsyncClient() as c:
            r = await c.post(
                f"{url}/anthropic-us-east/v1/messages",
                json=body,
                headers={"x-api-key": SENTINEL, "anthropic-version": "2023-06-01"},
            )
        proc.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(proc.communicate(), 15)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert r.status_code == 200 and proc.returncode == 0
    assert "recorded 1 exchange(s)" in rest.decode()
    assert SENTINEL not in _only_file_text(tmp_path)
    (ex,) = load_cassette(tmp_path).exchanges
    assert ex.response.status == 200 and ex.request.stream and len(ex.response.chunks) > 2
    assert "".join(d for _, d in ex.response.chunks).encode() == r.content


def _only_file_text(folder: Path) -> str:
    (path,) = folder.glob("*.jsonl")
    return path.read_text()
