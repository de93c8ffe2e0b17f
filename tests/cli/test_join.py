"""The join block: the environment a second terminal needs, commands runnable as printed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent_failover.cli.join import JoinInfo, executable

INFO = JoinInfo(
    temporal_address="127.0.0.1:17233",
    task_queue="agent-failover",
    ui="http://127.0.0.1:18233",
    sim_url="http://127.0.0.1:40123",
    redis_url="redis://127.0.0.1:6379/0",
    redis_namespace="failover-demo-1a2b3c4d",
)


def test_env_carries_address_queue_simulator_and_store() -> None:
    assert INFO.env() == {
        "TEMPORAL_ADDRESS": "127.0.0.1:17233",
        "FAILOVER_TASK_QUEUE": "agent-failover",
        "SIM_URL": "http://127.0.0.1:40123",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "FAILOVER_REDIS_NAMESPACE": "failover-demo-1a2b3c4d",
    }


def test_a_custom_policy_is_passed_on(tmp_path: Path) -> None:
    info = INFO.model_copy(update={"policy": tmp_path / "my policy.yaml"})
    assert info.env()["FAILOVER_POLICY"] == str(tmp_path / "my policy.yaml")
    assert f"FAILOVER_POLICY='{tmp_path / 'my policy.yaml'}'" in info.export_line()


def test_lines_name_ui_simulator_namespace_and_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "\n".join(INFO.lines())
    assert "http://127.0.0.1:18233/namespaces/default/workflows" in text
    assert "http://127.0.0.1:40123" in text and "failover-demo-1a2b3c4d" in text
    assert " run 'Compare two queue designs for order events'" in text
    assert text.rstrip().endswith("one more worker: same queue, simulator, health state")


def test_worker_line_uses_worker_py_when_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert INFO.commands()["worker"].endswith(" worker")  # installed package: no worker.py
    (tmp_path / "worker.py").write_text("")
    assert INFO.commands()["worker"].endswith("python worker.py")


def test_executable_is_spelled_with_its_path_when_not_on_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.chdir(Path(sys.executable).parents[2])
    assert executable("failover") == str(
        Path(sys.executable).parent.relative_to(Path.cwd()) / "failover"
    )
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    assert executable("failover") == "failover"
