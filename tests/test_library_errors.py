"""Set-up errors on the library path, as real processes: a user's script that fails on a
bad or missing policy, an unreachable Temporal or Redis prints one line saying what is
wrong and what to do, with no traceback (unless ``-v``), and user code can catch them all
as ``SetupError``."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_failover.config import DEFAULT_POLICY_PATH

SCRIPT_TIMEOUT_S = 60


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / "user_script.py"
    script.write_text(textwrap.dedent(code))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}  # no FAILOVER_* or REDIS_URL inherited
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S,
    )  # fmt: skip


def _one_line(proc: subprocess.CompletedProcess[str], code: int, *parts: str) -> str:
    assert proc.returncode == code, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("error: "), proc.stderr
    for part in parts:
        assert part in first, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    return first


@pytest.fixture
def typo_policy(tmp_path: Path) -> Path:
    bad = tmp_path / "policy.yaml"
    bad.write_text(DEFAULT_POLICY_PATH.read_text().replace("ttft_budget_ms", "ttft_budget", 1))
    return bad


PLUGIN = """
import sys
from agent_failover import FailoverPlugin
FailoverPlugin(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "-v" else None)
"""


def test_bad_policy_to_the_plugin_is_one_line(typo_policy: Path, tmp_path: Path) -> None:
    """The file and the field; the traceback only with ``-v``."""
    proc = _run(PLUGIN, str(typo_policy), cwd=tmp_path)
    _one_line(proc, 1, "ttft_budget")
    verbose = _run(PLUGIN, str(typo_policy), "-v", cwd=tmp_path)
    assert "Traceback" in verbose.stderr and "error: " in verbose.stderr


def test_no_policy_is_one_line_saying_how(tmp_path: Path) -> None:
    proc = _run(PLUGIN, cwd=tmp_path)
    _one_line(proc, 1, "no policy given", "FAILOVER_POLICY", "failover dev")


def test_run_and_exit_exits_2_on_a_policy_error(typo_policy: Path, tmp_path: Path) -> None:
    proc = _run(
        """
        import sys
        from agent_failover import FailoverPlugin, run_and_exit
        run_and_exit(lambda: FailoverPlugin(sys.argv[1]))
        """,
        str(typo_policy),
        cwd=tmp_path,
    )
    _one_line(proc, 2, "ttft_budget")


def test_unreachable_temporal_in_connect_client(tmp_path: Path) -> None:
    """The address and namespace, and how to start or point at a server; catchable."""
    port = _dead_port()
    proc = _run(
        """
        import asyncio, sys
        from agent_failover import SetupError, connect_client
        try:
            asyncio.run(connect_client(sys.argv[1]))
        except SetupError as exc:
            print("caught", type(exc).__name__)
        asyncio.run(connect_client(sys.argv[1]))
        """,
        f"127.0.0.1:{port}",
        cwd=tmp_path,
    )
    assert proc.stdout.strip() == "caught TemporalUnreachable"
    _one_line(proc, 1, f"cannot reach Temporal at 127.0.0.1:{port} (namespace default)",
              "failover dev", "TEMPORAL_ADDRESS")  # fmt: skip


@pytest.mark.devserver
async def test_unreachable_redis_in_a_users_worker(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A user's worker with an unreachable ``redis_url``: one line naming it."""
    dead = f"redis://127.0.0.1:{_dead_port()}/0"
    address = dev_env.client.service_client.config.target_host
    proc = await asyncio.to_thread(
        _run,
        """
        import asyncio, sys
        from agent_failover import FailoverPlugin, connect_client
        from temporalio.worker import Worker

        async def main(address, redis_url, policy):
            client = await connect_client(address)
            plugin = FailoverPlugin(policy, redis_url=redis_url, start_monitor=False)
            await Worker(client, task_queue="user-app", plugins=[plugin]).run()

        asyncio.run(main(*sys.argv[1:4]))
        """,
        address,
        dead,
        str(DEFAULT_POLICY_PATH),
        cwd=tmp_path,
    )
    _one_line(proc, 1, f"Redis at {dead} (redis_url) is not reachable", "REDIS_URL")


@pytest.mark.devserver
async def test_namespace_without_search_attributes_in_a_users_worker(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``search_attributes="require"`` on a namespace without them: one line with the exact
    ``temporal operator search-attribute create`` command, exit 1."""
    from tests.workflows.test_search_attributes_devserver import _fresh_namespace

    bare = await _fresh_namespace(dev_env)
    address = dev_env.client.service_client.config.target_host
    proc = await asyncio.to_thread(
        _run,
        """
        import asyncio, sys
        from agent_failover import FailoverPlugin, connect_client
        from temporalio.worker import Worker

        async def main(address, namespace, policy):
            client = await connect_client(address, namespace)
            plugin = FailoverPlugin(policy, stores="memory", start_monitor=False,
                                    search_attributes="require")
            await Worker(client, task_queue="user-app", plugins=[plugin]).run()

        asyncio.run(main(*sys.argv[1:4]))
        """,
        address,
        bare.namespace,
        str(DEFAULT_POLICY_PATH),
        cwd=tmp_path,
    )
    _one_line(
        proc,
        1,
        f"namespace {bare.namespace!r} lacks the search attributes",
        f"temporal operator search-attribute create --address {address} "
        f"--namespace {bare.namespace} --name FailoverCount --name WorstTier --type Int",
    )
