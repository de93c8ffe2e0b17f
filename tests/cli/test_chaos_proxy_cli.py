"""`failover chaos-proxy` as a real process: it announces where it listens, injects the
scenario, logs one redacted line per request, and stops cleanly on SIGINT and SIGTERM;
bad input is refused with exit 2 and the field named."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from agent_failover.testing.sim.server import RunningSimulator
from tests.cli.conftest import FAILOVER, ROOT, invoke

SECRET = "sk-cli-SENTINEL-51d0e2"
DRILL = str(ROOT / "bench/scenarios/hard_primary_outage.yaml")


async def _read_until(stream: asyncio.StreamReader, marker: str, seen: list[str]) -> str:
    async with asyncio.timeout(30):
        while True:
            raw = await stream.readline()
            if not raw:
                raise AssertionError("exited early:\n" + "\n".join(seen))
            seen.append(raw.decode().rstrip("\n"))
            if marker in seen[-1]:
                return seen[-1]


@pytest.mark.parametrize(("sig", "verbose"), [(signal.SIGTERM, []), (signal.SIGINT, ["-v"])])
async def test_serves_logs_redacted_and_stops_on_signal(
    simulator: RunningSimulator, sig: signal.Signals, verbose: list[str]
) -> None:
    """Also with -v, where headers are logged (redacted) and HTTP clients are chatty."""
    proc = await asyncio.create_subprocess_exec(
        FAILOVER,
        *verbose,
        "chaos-proxy",
        "--upstream",
        simulator.url,
        "--scenario",
        DRILL,
        "--port",
        "0",
        "--start-at",
        "2000-01-01T00:00:00Z",  # long ago: the whole timeline is over, all passes
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out: list[str] = []
    err: list[str] = []
    try:
        line = await _read_until(proc.stdout, "listening on", out)  # type: ignore[arg-type]
        url = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)  # type: ignore[union-attr]
        async with httpx.AsyncClient() as c:
            r = await c.get(
                f"{url}/gemini-flash/v1beta/models?key={SECRET}", headers={"x-api-key": SECRET}
            )
            status = (await c.get(f"{url}/_chaos/status")).json()
        await _read_until(proc.stderr, "v1beta/models", err)  # type: ignore[arg-type]
        proc.send_signal(sig)
        rest_out, rest_err = await asyncio.wait_for(proc.communicate(), 15)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = "\n".join(out + err) + rest_out.decode() + rest_err.decode()
    assert r.status_code == 200 and status["phase"] == "after"
    assert proc.returncode == 0, text
    assert "chaos proxy stopping" in text and "Traceback" not in text
    assert SECRET not in text and "?key=<redacted>" in text
    if verbose:  # the forwarded headers are shown, with the key's value hidden
        assert "('x-api-key', '<redacted>')" in text


async def test_bad_scenario_and_upstream_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_text("events:\n  - {from: 0, endpoint: x, faults: [{kind: stream_stall}]}\n")
    # --port 0 everywhere: should a check ever let one through, no fixed port is taken.
    result = await invoke(
        ["chaos-proxy", "--upstream", "http://127.0.0.1:9", "--scenario", str(bad), "--port", "0"]
    )
    assert result.exit_code == 2 and "events.0.faults.0" in result.stderr
    assert "stream_stall needs 'seconds'" in result.stderr and "Traceback" not in result.output
    base = ["chaos-proxy", "--scenario", DRILL, "--port", "0", "--upstream"]
    result = await invoke([*base, "api.example.com"])
    assert result.exit_code == 2 and "--upstream" in result.stderr
    result = await invoke([*base, "http://x", "--provider", "foo"])
    assert result.exit_code == 2 and "--provider" in result.stderr


async def test_help_describes_the_command() -> None:
    result = await invoke(["chaos-proxy", "--help"])
    assert result.exit_code == 0 and "Usage" in result.output
    for option in ("--upstream", "--scenario", "--port", "--start-at", "--provider"):
        assert option in result.output
