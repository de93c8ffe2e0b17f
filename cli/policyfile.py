"""Which policy file a command uses, and loading it the CLI's way.

:func:`policy_path`: ``--policy``, else ``FAILOVER_POLICY``, else the running dev stack's,
else the shipped demo policy. Both loaders turn a bad file into a :class:`CliError`
(exit 2) naming every problem with its field path, so a command never prints a traceback
for a typo in YAML.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from agent_failover.cli.errors import EXIT_BAD_INPUT, CliError
from agent_failover.config import DEFAULT_POLICY_PATH
from agent_failover.config.loader import load_policy
from agent_failover.resilience.config import PolicyConfig, PolicyError

log = logging.getLogger(__name__)


def policy_path(flag: Path | None) -> Path:
    """--policy, else FAILOVER_POLICY, else the running dev stack's, else the demo policy."""
    if flag is not None:
        return flag
    if os.environ.get("FAILOVER_POLICY"):
        return Path(os.environ["FAILOVER_POLICY"])
    from agent_failover.cli.stackfile import read_stack_file

    stack = read_stack_file() or {}
    return Path(stack["policy"]) if stack.get("policy") else DEFAULT_POLICY_PATH


def load_policy_without_lock(path: Path) -> PolicyConfig:
    """The policy without its lock (qualify writes the lock), or exit 2 with every field."""
    try:
        return load_policy(path, with_lock=False)
    except PolicyError as exc:
        raise CliError(f"invalid policy {path}:\n{exc}", EXIT_BAD_INPUT) from None


def load_policy_for_cli(
    path: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> PolicyConfig:
    """The policy, or a :class:`CliError` (exit 2) listing every problem with its field."""
    try:
        policy = load_policy(path, env=env)
    except PolicyError as exc:
        problems = "\n".join(f"  {p}: {m}" if p else f"  {m}" for p, m in exc.errors)
        raise CliError(f"invalid policy {os.fspath(path)}:\n{problems}", EXIT_BAD_INPUT) from None
    for w in policy.warnings:
        log.warning("policy: %s", w)
    return policy
