"""Reading a policy file (IO), beside the pure policy models in ``resilience.config``.

:func:`load_policy` reads YAML with a loader that rejects duplicate keys, non-UTF-8
bytes and unreasonably deep nesting, then hands the data to
:func:`agent_failover.resilience.config.parse_policy`, which validates every field.
Every problem is a :class:`PolicyError` naming the field path (or the file position);
:func:`check_policy_file` backs ``failover config check``; :func:`load_policy_or_exit`
is what entry points call at start-up (exit 2 with every error listed).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from agent_failover.providers.extras import missing_extras
from agent_failover.resilience.config import (
    PolicyConfig,
    PolicyError,
    describe_policy,
    parse_policy,
)

log = logging.getLogger("agent_failover.policy")


def load_policy(
    path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> PolicyConfig:
    """Read and validate a YAML policy file; raise :class:`PolicyError` with field paths."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError([(str(p), f"cannot read policy file: {exc.strerror or exc}")]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark else str(p)
        problem = getattr(exc, "problem", None) or str(exc)
        raise PolicyError([(where, f"invalid YAML: {problem}")]) from None
    return parse_policy(data, env=env)


def check_policy_file(
    path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> tuple[bool, list[str]]:
    """Load ``path``; return ``(ok, lines)`` with errors (one per field path) or a summary.

    Warnings (e.g. a standby sharing organisation and region with its primary) do not
    make the policy bad; they are listed after the summary.
    """
    try:
        cfg = load_policy(path, env=env)
    except PolicyError as exc:
        lines = [f"policy {os.fspath(path)} is invalid ({len(exc.errors)} problem(s)):"]
        lines += [f"  error: {p}: {m}" if p else f"  error: {m}" for p, m in exc.errors]
        return False, lines
    lines = [f"OK: policy {os.fspath(path)} is valid", *describe_policy(cfg)]
    lines += [f"  warning: {w}" for w in cfg.warnings]
    lines += [f"  warning: {w}" for w in extras_warnings(cfg)]
    return True, lines


def extras_warnings(cfg: PolicyConfig) -> list[str]:
    """Routes whose optional dependencies are not installed here (say which extra).

    A warning, not an error: the machine that checks a policy is not always the one that
    runs the workers; a worker without the extra fails that route as ``auth``.
    """
    return [
        f"endpoints.{name}.{field}: {message}"
        for name, ep in cfg.endpoints.items()
        for field, message in missing_extras(ep)
    ]


def load_policy_or_exit(path: str | os.PathLike[str]) -> PolicyConfig:
    """Load the policy, or print every error with its field path and exit 2."""
    try:
        policy = load_policy(Path(path))
    except PolicyError as exc:
        print(f"invalid policy {path}:\n{exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    for w in policy.warnings:
        log.warning("policy: %s", w)
    return policy
