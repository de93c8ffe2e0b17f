"""Reading and writing the qualification lock file (``roster.lock.yaml``), the IO beside
:mod:`agent_failover.resilience.qualification`.

``failover qualify`` writes one entry per role (other roles' entries are kept); the
policy loader reads the file named by the policy's ``qualification.lock_file`` (relative
to the policy file) and attaches each role's entry, so the planner can leave out routes
below the role's ``min_quality``. Problems are :class:`PolicyError` values naming the
file and the field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from pydantic import ValidationError

from agent_failover.resilience.config import PolicyConfig, PolicyError
from agent_failover.resilience.qualification import (
    GoldenItem,
    QualificationLock,
    RoleQualification,
    golden_hash,
)

LOCK_HEADER = (
    "# Written by `failover qualify`: measured quality per role and route. Commit it next to\n"
    "# the policy; the policy's qualification.lock_file points here. Do not edit by hand:\n"
    "# re-run `failover qualify --role ROLE --golden FILE --output THIS_FILE` instead.\n"
)


def read_lock(path: str | os.PathLike[str]) -> QualificationLock:
    """The lock at ``path``; a :class:`PolicyError` says what is wrong (missing, invalid)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyError(
            [
                (
                    "qualification.lock_file",
                    f"lock file {p} not found: run `failover qualify --role ROLE --golden "
                    f"FILE.jsonl --output {p}` or remove the key",
                )
            ]
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PolicyError([(str(p), f"cannot read the qualification lock: {exc}")]) from None
    try:
        return QualificationLock.model_validate(data or {})
    except ValidationError as exc:
        raise PolicyError(
            [
                (f"{p}: {'.'.join(str(x) for x in e['loc']) or '<lock>'}", e["msg"])
                for e in exc.errors()
            ]
        ) from None


def write_lock(path: str | os.PathLike[str], lock: QualificationLock) -> None:
    """Write ``lock`` atomically (a crash never leaves half a file); ``stale`` is computed
    at load time and never written."""
    p = Path(path)
    data = lock.model_dump(mode="json", exclude={"roles": {"__all__": {"stale"}}})
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(LOCK_HEADER + body, encoding="utf-8")
    os.replace(tmp, p)


def lock_path(policy: PolicyConfig, policy_path: str | os.PathLike[str]) -> Path | None:
    """The lock file the policy names, resolved against the policy file's folder."""
    name = policy.qualification.lock_file
    if name is None:
        return None
    p = Path(os.path.expanduser(name))
    return p if p.is_absolute() else Path(policy_path).resolve().parent / p


def attach_lock(policy: PolicyConfig, policy_path: str | os.PathLike[str]) -> PolicyConfig:
    """The policy with its lock file's verdicts attached (unchanged without a lock key);
    each entry's golden set is hashed again, so a changed set marks it stale."""
    p = lock_path(policy, policy_path)
    if p is None:
        return policy
    lock = read_lock(p)
    now: dict[str, str | None] = {}
    roles = {}
    for name, entry in lock.roles.items():
        now[name], problem = golden_now(p, entry)
        roles[name] = entry.model_copy(update={"stale": [problem]}) if problem else entry
    return policy.with_qualification(lock.model_copy(update={"roles": roles}), now)


def golden_now(lock_file: Path, entry: RoleQualification) -> tuple[str | None, str | None]:
    """The current hash of the entry's golden set, or why it cannot be checked (None, None:
    the entry names no path)."""
    if entry.golden_path is None:
        return None, None
    p = Path(os.path.expanduser(entry.golden_path))
    p = p if p.is_absolute() else lock_file.resolve().parent / p
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
        items = [
            GoldenItem.model_validate(json.loads(line))
            for line in lines
            if line.strip() and not line.lstrip().startswith("#")
        ]
    except FileNotFoundError:
        return None, f"golden set {p} not found"
    except (OSError, UnicodeDecodeError, ValueError, ValidationError) as exc:
        return None, f"golden set {p} unreadable ({type(exc).__name__})"
    return golden_hash(items), None


def relative_golden_path(golden: Path, lock_file: Path) -> str:
    """How the lock names its golden set: relative to the lock's folder when below it."""
    g, base = golden.resolve(), lock_file.resolve().parent
    try:
        return str(g.relative_to(base))
    except ValueError:
        return str(g)
