"""Policy errors and the validation helpers every policy model shares (pure, no IO).

A policy that cannot be used raises :class:`PolicyError`, carrying every problem found as
a ``(field path, message)`` pair so the CLI and a worker's start-up failure show them all
at once; :class:`UnknownNameError` is the same error for a lookup of a role or endpoint
the policy does not define. :data:`STRICT` is the model configuration of every policy
section (unknown keys rejected, values frozen), and :func:`validation_errors` turns a
pydantic ``ValidationError`` into field-path pairs such as
``roles.critic.sla.p95_ms: Input should be greater than 0``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, ValidationError

from agent_failover.resilience.setup_errors import SetupError

#: Every policy section forbids unknown keys (a typo fails) and is immutable once built.
STRICT = ConfigDict(extra="forbid", frozen=True)


class PolicyError(SetupError):
    """A policy that cannot be used, with every problem found and its field path.

    ``errors`` holds ``(field_path, message)`` pairs; ``str()`` prints one per line so
    the CLI and the worker's start-up failure show all problems at once.
    """

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = list(errors) or [("<policy>", "invalid policy")]
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(f"{path}: {msg}" if path else msg for path, msg in self.errors)


class UnknownNameError(PolicyError, KeyError):
    """A lookup of a role or endpoint the policy does not define (also a ``KeyError``)."""

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message; keep PolicyError's "path: message".
        return PolicyError.__str__(self)


def format_loc(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as a field path: ``("roles", "a", "tier0", 0)`` ->
    ``roles.a.tier0[0]``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def validation_errors(exc: ValidationError, *, prefix: str = "") -> list[tuple[str, str]]:
    """Each error of ``exc`` as ``(field path, message)``, the path under ``prefix``."""
    out = []
    for err in exc.errors(include_url=False):
        # Drop pydantic's union/function tags (e.g. 'function-after[...]') from the path.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        path = format_loc(loc)
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        msg = err["msg"].removeprefix("Value error, ")
        out.append((path or "<policy>", msg))
    return out
