"""Reading and writing the qualification lock file (``roster.lock.yaml``), the IO beside
:mod:`agent_failover.resilience.qualification`.

``failover qualify`` writes one entry per role (other roles' entries are kept); the
policy loader reads the file named by the policy's ``qualification.lock_file`` (relative
to the policy file) and attaches each role's entry, so the planner can leave out routes
below the role's ``min_quality``. Problems are :class:`PolicyError` values naming the
file and the field.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import ValidationError

from agent_failover.resilience.config import PolicyConfig, PolicyError
from agent_failover.resilience.qualification import QualificationLock

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
    """Write ``lock`` atomically (a crash never leaves half a file)."""
    p = Path(path)
    body = yaml.safe_dump(lock.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
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
    """The policy with its lock file's verdicts attached (unchanged without a lock key)."""
    p = lock_path(policy, policy_path)
    return policy if p is None else policy.with_qualification(read_lock(p))
