"""The qualification lock file: written atomically, read by the policy loader, errors named."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import check_policy_file, load_policy
from agent_failover.config.lock import read_lock, write_lock
from agent_failover.resilience.config import PolicyError
from agent_failover.resilience.qualification import (
    QualificationLock,
    RoleQualification,
    RouteQualification,
)

ENTRY = RoleQualification(
    golden_set="analyst.jsonl",
    golden_hash="0123456789abcdef",
    scorer="normalized",
    min_quality=0.85,
    qualified_at="2026-11-30T12:00:00+00:00",
    routes={
        "cheap-mini": RouteQualification(
            quality=0.4, pass_rate=0.4, items=20, errors=0, latency_p50_ms=8.0,
            latency_p95_ms=15.0, qualified=False,
        ),
    },
)  # fmt: skip


def _policy(tmp_path: Path, qualification: str) -> Path:
    text = DEFAULT_POLICY_PATH.read_text()
    text = text.replace("qualification:\n  judge_route: anthropic-us-east\n", qualification)
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    """The lock file written by qualify reads back identically, with its header comment."""
    path = tmp_path / "roster.lock.yaml"
    lock = QualificationLock(roles={"analyst": ENTRY})
    write_lock(path, lock)
    assert path.read_text().startswith("# Written by `failover qualify`")
    assert read_lock(path) == lock
    assert not list(tmp_path.glob(".*.tmp"))


def test_loader_attaches_the_lock_relative_to_the_policy(tmp_path: Path) -> None:
    """qualification.lock_file (relative to the policy file) is read at load time and each
    role's entry lands on RolePolicy.qualification; without the key nothing changes."""
    (tmp_path / "locks").mkdir()
    write_lock(tmp_path / "locks" / "r.lock.yaml", QualificationLock(roles={"analyst": ENTRY}))
    policy = load_policy(_policy(tmp_path, "qualification:\n  lock_file: locks/r.lock.yaml\n"))
    assert policy.role("analyst").qualification == ENTRY
    assert policy.role("critic").qualification is None
    assert load_policy(DEFAULT_POLICY_PATH).role("analyst").qualification is None


def test_missing_lock_names_the_key_and_the_fix(tmp_path: Path) -> None:
    """A lock_file that does not exist fails loading with the key and the command to run;
    with_lock=False (what `failover qualify` uses) loads anyway."""
    path = _policy(tmp_path, "qualification:\n  lock_file: nope.yaml\n")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    [(where, message)] = info.value.errors
    assert where == "qualification.lock_file" and "failover qualify" in message
    assert load_policy(path, with_lock=False).qualification.lock_file == "nope.yaml"


def test_invalid_lock_is_reported_with_the_field(tmp_path: Path) -> None:
    """A hand-edited lock with a bad value names the file and the field."""
    lock = tmp_path / "bad.yaml"
    lock.write_text("version: 1\nroles:\n  analyst:\n    golden_set: x\n")
    ok, lines = check_policy_file(_policy(tmp_path, "qualification:\n  lock_file: bad.yaml\n"))
    assert not ok
    assert any("bad.yaml: roles.analyst.golden_hash" in ln for ln in lines)


def test_verdicts_cannot_be_written_in_the_policy(tmp_path: Path) -> None:
    """roles.<name>.qualification comes from the lock only; an unknown judge route is named."""
    text = DEFAULT_POLICY_PATH.read_text().replace(
        "  analyst:\n", "  analyst:\n    qualification: {golden_set: x}\n", 1
    )
    path = tmp_path / "p.yaml"
    path.write_text(text.replace("judge_route: anthropic-us-east", "judge_route: gpt-x"))
    ok, lines = check_policy_file(path)
    assert not ok
    assert any("roles.analyst.qualification" in ln and "lock_file" in ln for ln in lines)
    path.write_text(DEFAULT_POLICY_PATH.read_text().replace("judge_route: anthropic-us-east",
                                                            "judge_route: gpt-x"))  # fmt: skip
    ok, lines = check_policy_file(path)
    assert not ok and any("qualification.judge_route" in ln and "gpt-x" in ln for ln in lines)
