"""`failover status` and `config check` say when a role's qualification lock is stale."""

from __future__ import annotations

from pathlib import Path

import yaml

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.config.lock import write_lock
from agent_failover.resilience.config.gates import role_fingerprint
from agent_failover.resilience.qualification import (
    QualificationLock,
    RoleQualification,
    RouteQualification,
)
from tests.cli.conftest import invoke
from tests.stores.conftest import _delete_namespace, namespace, redis_url  # noqa: F401


def _lock_for_a_changed_prompt(tmp_path: Path) -> Path:
    """The demo policy with a lock whose critic entry was measured with another prompt."""
    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    data["qualification"]["lock_file"] = "roster.lock.yaml"
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(data))
    fingerprint = role_fingerprint(load_policy(DEFAULT_POLICY_PATH).role("critic"))
    verdict = RouteQualification(quality=0.7, pass_rate=0.7, items=20, errors=0, qualified=False)
    entry = RoleQualification(
        golden_set="critic.jsonl",
        golden_hash="0123456789abcdef",
        scorer="json",
        min_quality=0.0,
        qualified_at="2026-12-01T10:00:00+00:00",
        routes={"anthropic-us-east": verdict.model_copy(update={"quality": 1.0}),
                "cheap-mini": verdict},
        fingerprint={**fingerprint, "system_prompt": "0000000000000000"},
    )  # fmt: skip
    write_lock(tmp_path / "roster.lock.yaml", QualificationLock(roles={"critic": entry}))
    return policy


async def test_config_check_and_status_say_the_lock_is_stale(
    tmp_path: Path,
    redis_url: str,  # noqa: F811
    namespace: str,  # noqa: F811
) -> None:
    """A lock written for another system prompt: `config check` prints STALE with what
    changed, and `status --from-store` lists the role's lock as STALE (still applied)
    with the route its gates leave out."""
    policy = _lock_for_a_changed_prompt(tmp_path)
    check = await invoke(["config", "check", str(policy)], env={"SIM_URL": "http://sim"})
    assert check.exit_code == 0, check.output
    assert "STALE: system prompt changed; still applied" in check.output
    args = ["status", "--from-store", "--redis-url", redis_url, "--namespace", namespace]
    try:
        result = await invoke([*args, "--policy", str(policy)], env={"SIM_URL": "http://sim"})
    finally:
        await _delete_namespace(redis_url, namespace)
    assert result.exit_code == 0, result.output
    section = result.output.split("Qualification (the lock file, per role)")[1]
    line = next(x for x in section.splitlines() if " critic " in x)
    assert "STALE: system prompt changed (still applied)" in line
    assert "cheap-mini" in line
