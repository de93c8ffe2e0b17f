"""``testing.procs.worker_env``: the environment tests and benchmarks give a worker child."""

from __future__ import annotations

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.testing.procs import worker_env


def test_names_the_demo_policy_and_one_namespace_per_queue(monkeypatch) -> None:
    monkeypatch.setenv("FAILOVER_POLICY", "/somewhere/else.yaml")
    monkeypatch.setenv("KEPT_FROM_PARENT", "yes")
    env = worker_env(address="127.0.0.1:7233", sim_url="http://sim", task_queue="q-1")
    assert env["FAILOVER_POLICY"] == str(DEFAULT_POLICY_PATH)
    assert env["FAILOVER_TASK_QUEUE"] == env["FAILOVER_REDIS_NAMESPACE"] == "q-1"
    assert (env["TEMPORAL_ADDRESS"], env["SIM_URL"], env["LOG_LEVEL"]) == (
        "127.0.0.1:7233",
        "http://sim",
        "WARNING",
    )
    assert env["KEPT_FROM_PARENT"] == "yes"


def test_extra_variables_win_and_unset_ones_stay_out(monkeypatch) -> None:
    monkeypatch.delenv("SIM_URL", raising=False)
    monkeypatch.delenv("FAILOVER_TASK_QUEUE", raising=False)
    env = worker_env(address="a", policy="/p.yaml", log_level="INFO", LOG_LEVEL="DEBUG")
    assert env["FAILOVER_POLICY"] == "/p.yaml"
    assert env["LOG_LEVEL"] == "DEBUG"
    assert "SIM_URL" not in env and "FAILOVER_TASK_QUEUE" not in env
