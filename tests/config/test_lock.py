"""The qualification lock file: written atomically, read by the policy loader, errors named."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_failover.cli.qualify import read_golden
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import check_policy_file, load_policy
from agent_failover.config.lock import read_lock, relative_golden_path, write_lock
from agent_failover.datasets import DATASETS_DIR
from agent_failover.resilience.config import PolicyError
from agent_failover.resilience.config.describe import describe_policy
from agent_failover.resilience.config.gates import role_fingerprint
from agent_failover.resilience.qualification import (
    QualificationLock,
    RoleQualification,
    RouteQualification,
    golden_hash,
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
    attached = policy.role("analyst").qualification
    assert attached is not None and attached.model_copy(update={"stale": []}) == ENTRY
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


def _fresh_lock(tmp_path: Path, golden: Path) -> Path:
    """A lock for the analyst written against the demo policy as it is, golden set beside it."""
    role = load_policy(DEFAULT_POLICY_PATH).role("analyst")
    entry = ENTRY.model_copy(
        update={
            "fingerprint": role_fingerprint(role),
            "golden_path": relative_golden_path(golden, tmp_path / "r.lock.yaml"),
        }
    )
    entry = entry.model_copy(update={"golden_hash": golden_hash(read_golden(golden))})
    write_lock(tmp_path / "r.lock.yaml", QualificationLock(roles={"analyst": entry}))
    assert "stale" not in (tmp_path / "r.lock.yaml").read_text()
    return tmp_path / "r.lock.yaml"


def test_lock_is_fresh_until_the_prompt_schema_tools_or_golden_set_change(
    tmp_path: Path,
) -> None:
    """A lock written for the role as it is loads fresh; changing the system prompt, the
    output schema, the tools or the golden set's content marks it stale, and `config check`
    says so with what changed."""
    golden = tmp_path / "analyst.jsonl"
    golden.write_text((DATASETS_DIR / "analyst.jsonl").read_text())
    _fresh_lock(tmp_path, golden)
    key = "qualification:\n  lock_file: r.lock.yaml\n"
    path = _policy(tmp_path, key)
    assert load_policy(path).role("analyst").qualification.stale == []
    base = path.read_text()
    changes = {
        "system prompt changed": ("You analyse one subtask", "You analyse one subtask carefully"),
        "output schema changed": (
            "  analyst:\n",
            "  analyst:\n    output_schema: {type: object}\n",
        ),
        "tools changed": ("  analyst:\n", "  analyst:\n    tools: [{name: search}]\n"),
    }
    static = "no conclusions were drawn.\n"
    for reason, (old, new) in changes.items():
        assert old in base, old
        text = base.replace(old, new, 1)
        if reason == "output schema changed":  # the static answer must then fit it
            text = text.replace(static, static + "        data: {}\n", 1)
        path.write_text(text)
        assert load_policy(path).role("analyst").qualification.stale == [reason]
    path.write_text(base)
    golden.write_text(golden.read_text().replace('"118"', '"119"', 1))
    [why] = load_policy(path).role("analyst").qualification.stale
    assert why.startswith("golden set analyst.jsonl changed")
    ok, lines = check_policy_file(path)
    assert ok and any("STALE: golden set analyst.jsonl changed" in ln for ln in lines), lines
    golden.unlink()
    assert "not found" in load_policy(path).role("analyst").qualification.stale[0]
    assert any("STALE" in ln for ln in describe_policy(load_policy(path)))
