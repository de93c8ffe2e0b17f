"""``failover sim fault`` / ``sim clear`` against a running simulator, as real processes:
a fault set by endpoint or by the user's route name, one with an end, clearing, and one
line for each mistake."""

from __future__ import annotations

from pathlib import Path

from agent_failover.cli.init_project import POLICY
from agent_failover.testing.servers import free_port
from agent_failover.testing.sim.admin import SimAdmin
from agent_failover.testing.sim.server import RunningSimulator
from tests.cli.conftest import cli_env, run_cli


def _one_error(proc, code: int, *fragments: str) -> str:
    assert proc.returncode == code, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


async def _faults(admin: SimAdmin, endpoint: str) -> list[str]:
    ep = next(e for e in await admin.endpoints() if e["name"] == endpoint)
    return [f["kind"] for f in ep.get("faults", [])]


async def test_fault_then_clear(simulator: RunningSimulator, sim_admin: SimAdmin) -> None:
    """`sim fault EP overloaded` sets it until cleared; `sim clear` removes every fault."""
    env = cli_env(SIM_URL=simulator.url)
    proc = await run_cli(["sim", "fault", "openai-us", "overloaded"], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "openai-us: overloaded until `failover sim clear`"
    assert await _faults(sim_admin, "openai-us") == ["overloaded"]
    proc = await run_cli(["sim", "fault", "all", "auth_error"], env)
    assert proc.returncode == 0 and proc.stdout.startswith("all (simulator "), proc.stderr
    names = [e["name"] for e in await sim_admin.endpoints()]
    assert [await _faults(sim_admin, n) for n in names] == [["auth_error"]] * len(names)
    proc = await run_cli(["sim", "clear"], env)
    assert proc.returncode == 0 and proc.stdout.startswith("cleared every fault"), proc.stderr
    assert [await _faults(sim_admin, n) for n in names] == [[]] * len(names)


async def test_fault_by_the_users_route_name_for_a_while(
    simulator: RunningSimulator, sim_admin: SimAdmin, tmp_path: Path
) -> None:
    """A route of the user's policy (its base_url on the simulator) names the endpoint;
    --for loads a one-event timeline that ends by itself."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = cli_env(SIM_URL=simulator.url, FAILOVER_POLICY=str(policy))
    proc = await run_cli(["sim", "fault", "claude-us", "server_error", "--for", "30s"], env)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first == "claude-us (simulator anthropic-us-east): server_error for 30 s"
    status = await sim_admin.scenario_status()
    assert status["active_events"] == [0] and status["duration_s"] == 30
    assert status["name"] == "server_error on claude-us"


async def test_mistakes_are_one_line(simulator: RunningSimulator, sim_admin: SimAdmin) -> None:
    """An unknown kind (exit 2, the kinds), an unknown route (exit 2, the endpoints), a
    fault missing its value (exit 2, the option), no simulator (exit 1, how to start one)."""
    env = cli_env(SIM_URL=simulator.url)
    _one_error(await run_cli(["sim", "fault", "openai-us", "melted"], env), 2, "overloaded")
    _one_error(await run_cli(["sim", "fault", "nope", "overloaded"], env), 2, "openai-us")
    _one_error(await run_cli(["sim", "fault", "openai-us", "latency"], env), 2, "--seconds")
    _one_error(await run_cli(["sim", "fault", "openai-us", "overloaded", "--for", "x"], env),
               2, "--for")  # fmt: skip
    dead = cli_env(SIM_URL=f"http://127.0.0.1:{free_port()}")
    _one_error(
        await run_cli(["sim", "clear"], dead), 1, "cannot reach the simulator", "failover sim"
    )
