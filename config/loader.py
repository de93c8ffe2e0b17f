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
from typing import Any

import yaml

from agent_failover.config.lock import attach_lock
from agent_failover.providers.extras import missing_extras
from agent_failover.resilience.config import (
    PolicyConfig,
    PolicyError,
    describe_policy,
    parse_policy,
)

log = logging.getLogger("agent_failover.policy")


#: Deeper than this is not a policy (the real one nests 5 levels); it is a mistake or an
#: attack on the parser's recursion.
MAX_NESTING = 32
#: Nodes visited when aliases are expanded; guards against "billion laughs" documents.
MAX_NODES = 200_000


class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader that stops composing past :data:`MAX_NESTING` levels."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_NESTING} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _where(p: Path, mark: Any) -> str:
    return f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)


def _check_tree(root: Any, p: Path) -> list[tuple[str, str]]:
    """Duplicate mapping keys, with the field path and both lines; bounded alias expansion."""
    errors: list[tuple[str, str]] = []
    visited = 0
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        visited += 1
        if visited > MAX_NODES:
            return [(str(p), f"too large once aliases are expanded (over {MAX_NODES} nodes)")]
        if isinstance(node, yaml.MappingNode):
            first_line: dict[str, int] = {}
            for key_node, value_node in node.value:
                key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
                where = f"{path}.{key}" if path else key
                line = key_node.start_mark.line + 1
                if key in first_line and key != "<<":
                    errors.append(
                        (
                            where,
                            f"duplicate key (lines {first_line[key]} and {line}); "
                            "the second would silently replace the first",
                        )
                    )
                first_line.setdefault(key, line)
                stack.append((value_node, where))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
    return errors


def _read_text(p: Path) -> str:
    """The file as UTF-8 text (a BOM is accepted), or a PolicyError saying where it is not."""
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise PolicyError([(str(p), f"cannot read policy file: {exc.strerror or exc}")]) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise PolicyError(
            [
                (
                    f"{p}:{line}",
                    f"not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start}; "
                    "save the file as UTF-8",
                )
            ]
        ) from None


def _unreadable_character(p: Path, text: str, exc: yaml.reader.ReaderError) -> tuple[str, str]:
    """A character YAML does not allow (a NUL byte, other control characters): its line,
    column and code point."""
    before = text[: exc.position]
    line = before.count("\n") + 1
    column = exc.position - (before.rfind("\n") + 1) + 1
    code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
    name = "a NUL byte" if code == 0 else f"control character U+{code:04X}"
    return (
        f"{p}:{line}:{column}",
        f"{name} (not allowed in YAML): a policy file is text; remove it",
    )


def load_policy(
    path: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    with_lock: bool = True,
) -> PolicyConfig:
    """Read and validate a YAML policy file; raise :class:`PolicyError` with field paths.

    When the policy names a ``qualification.lock_file`` (relative to the policy file), each
    role's verdicts from it are attached (``RolePolicy.qualification``); ``with_lock=False``
    skips that (``failover qualify`` writes the lock, so it may not exist yet).
    """
    p = Path(path)
    text = _read_text(p)
    loader: _LimitedLoader | None = None
    try:
        # Inside the try: the reader rejects control characters (a NUL byte) on creation.
        loader = _LimitedLoader(text)
        root = loader.get_single_node()
        if root is not None:
            dupes = _check_tree(root, p)
            if dupes:
                raise PolicyError(list(dict.fromkeys(dupes)))
        data = loader.construct_document(root) if root is not None else None
    except yaml.reader.ReaderError as exc:
        raise PolicyError([_unreadable_character(p, text, exc)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise PolicyError([(_where(p, mark), f"invalid YAML: {problem}")]) from None
    except RecursionError:
        raise PolicyError([(str(p), "invalid YAML: nested too deeply")]) from None
    finally:
        if loader is not None:
            loader.dispose()
    try:
        policy = parse_policy(data, env=env)
    except PolicyError as exc:
        raise PolicyError(_with_lines(exc.errors, _lines(root), p)) from None
    return attach_lock(policy, p) if with_lock else policy


def _lines(root: Any) -> dict[str, int]:
    """Field path -> the line (1-based) its key or item starts on."""
    out: dict[str, int] = {}
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
                where = f"{path}.{key}" if path else key
                out.setdefault(where, key_node.start_mark.line + 1)
                stack.append((value_node, where))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                out.setdefault(f"{path}[{i}]", item.start_mark.line + 1)
                stack.append((item, f"{path}[{i}]"))
    return out


def _with_lines(
    errors: list[tuple[str, str]], lines: dict[str, int], p: Path
) -> list[tuple[str, str]]:
    """Each error's message followed by ``(<file>:<line>)``: the line of its field, else
    of the nearest enclosing one the file has."""
    out = []
    for path, msg in errors:
        probe = path
        while probe and probe not in lines:
            probe = probe[: max(probe.rfind("."), probe.rfind("["), 0)]
        out.append((path, f"{msg} ({p}:{lines[probe]})" if probe else msg))
    return out


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
        print(f"error: invalid policy {path}:\n{exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    for w in policy.warnings:
        log.warning("policy: %s", w)
    return policy
