"""Reading a policy from data parsed out of YAML or JSON: :func:`parse_policy` (pure, no IO).

Parsing expands ``${VAR}`` / ``${VAR:-default}`` in every string, copies each map key of
``endpoints`` and ``roles`` into its entry's ``name``, rejects YAML booleans where a
number belongs (pydantic's lax mode would read ``true`` as 1), validates the models and
then runs the load-time rules (:func:`load_time_errors`). Every problem found is reported
at once in one :class:`~.validation.PolicyError`, with field paths even when pydantic
stopped before the cross-reference check. Reading a file is
``agent_failover.config.loader``.
"""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_failover.resilience.config.hints import with_hints
from agent_failover.resilience.config.policy import PolicyConfig
from agent_failover.resilience.config.roster import approving_static_errors
from agent_failover.resilience.config.validation import (
    PolicyError,
    UnknownNameError,
    validation_errors,
)


def load_time_errors(cfg: PolicyConfig) -> list[tuple[str, str]]:
    """Checks made when a policy is loaded (``config check``, worker start), not on every
    construction.

    A policy also travels inside running workflows' history and is validated again
    whenever a workflow decodes it; a rule added later must not make those old copies
    undecodable (the workflow task would fail forever), so newer rules live here:

    * every role's subset is built exactly as the role-context activity builds it, so
      ``config check``, worker start-up and the running workflow accept the same policies;
    * no static fallback approves (it answers when nothing could review).
    """
    errors: list[tuple[str, str]] = []
    for name, role in cfg.roles.items():
        errors.extend(approving_static_errors(role.roster.static, f"roles.{name}.roster.static"))
        try:
            cfg.checked_subset_for(name)
        except PolicyError as exc:
            errors.extend(exc.errors)
    return errors


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _interpolate(
    value: Any, env: Mapping[str, str], path: str, errors: list[tuple[str, str]]
) -> Any:
    """Expand ``${VAR}`` / ``${VAR:-default}`` in every string, recording unset variables."""
    if isinstance(value, str):

        def _sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in env and env[name] != "":
                return env[name]
            if default is not None:
                return default
            errors.append((path or "<policy>", f"environment variable {name!r} is not set"))
            return m.group(0)

        return _VAR.sub(_sub, value)
    if isinstance(value, dict):
        return {
            k: _interpolate(v, env, f"{path}.{k}" if path else str(k), errors)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_interpolate(v, env, f"{path}[{i}]", errors) for i, v in enumerate(value)]
    return value


def _inject_names(data: dict[str, Any], section: str, errors: list[tuple[str, str]]) -> None:
    """YAML maps name -> fields; the models carry the name, so copy the key in."""
    entries = data.get(section)
    if not isinstance(entries, dict):
        return
    for key, fields in entries.items():
        if isinstance(fields, dict):
            fields.setdefault("name", key)
        elif fields is not None:
            errors.append((f"{section}.{key}", "must be a mapping"))


def parse_policy(data: Any, *, env: Mapping[str, str] | None = None) -> PolicyConfig:
    """Validate a policy already parsed from YAML/JSON; raise :class:`PolicyError`.

    Strings are interpolated from ``env`` (default ``os.environ``) first; every problem
    found (interpolation, types, ranges, cross-references, schemas) is reported at once,
    an unknown field with the one meant, an unknown endpoint with the known ones.
    """
    try:
        return _parse_policy(data, env=env)
    except UnknownNameError:
        raise
    except PolicyError as exc:
        raise PolicyError(with_hints(exc.errors, PolicyConfig, data)) from None


def _parse_policy(data: Any, *, env: Mapping[str, str] | None) -> PolicyConfig:
    env = os.environ if env is None else env
    if not isinstance(data, dict):
        raise PolicyError([("<policy>", "the policy must be a mapping at the top level")])
    errors: list[tuple[str, str]] = []
    data = _interpolate(data, env, "", errors)
    if "warnings" in data:
        errors.append(("warnings", "is computed by validation and cannot be set"))
    roles = data.get("roles")
    for key, role in roles.items() if isinstance(roles, dict) else ():
        if isinstance(role, dict) and "qualification" in role:
            errors.append(
                (
                    f"roles.{key}.qualification",
                    "is read from the lock file named by qualification.lock_file "
                    "(written by `failover qualify`) and cannot be set here",
                )
            )
    _inject_names(data, "endpoints", errors)
    _inject_names(data, "roles", errors)
    if errors:
        raise PolicyError(errors)
    # pydantic's lax mode would read `true` as 1 and `false` as 0 for a number.
    bools = _bool_as_number_errors(data, PolicyConfig, "")
    try:
        cfg = PolicyConfig.model_validate(data)
    except ValidationError as exc:
        # Field errors stop pydantic before the cross-reference check runs; repeat the
        # name checks on the raw data so one run reports every problem.
        # A boolean's own error says it better than the range check of its 0 or 1.
        seen = {path for path, _ in bools}
        errors = bools + [e for e in validation_errors(exc) if e[0] not in seen]
        errors += _raw_reference_errors(data)
        raise PolicyError(list(dict.fromkeys(errors))) from None
    except PolicyError as exc:
        raise PolicyError(bools + exc.errors) from None
    if bools:
        raise PolicyError(bools)
    errors = load_time_errors(cfg)
    if errors:
        raise PolicyError(errors)
    return cfg


def _numeric_only(annotation: Any) -> bool:
    """The annotation takes numbers (int/float, maybe None) but never a bool."""
    args = typing.get_args(annotation) or (annotation,)
    types = {a for a in args if a is not type(None)}
    return bool(types) and bool not in types and types <= {int, float}


def _bool_as_number_errors(value: Any, model: Any, path: str) -> list[tuple[str, str]]:
    """Every YAML boolean sitting where the schema wants a number, with its field path."""
    if not (isinstance(value, dict) and isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    out: list[tuple[str, str]] = []
    for key, item in value.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue
        where = f"{path}.{key}" if path else str(key)
        ann = field.annotation
        if isinstance(item, bool) and _numeric_only(ann):
            out.append((where, f"expected a number, got a boolean ({str(item).lower()})"))
            continue
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        if origin is dict and len(args) == 2 and isinstance(item, dict):
            for k, v in item.items():
                out += _bool_as_number_errors(v, args[1], f"{where}.{k}")
        else:
            sub = next((a for a in (args or (ann,)) if isinstance(a, type)), None)
            out += _bool_as_number_errors(item, sub, where)
    return out


def _raw_reference_errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    """Unknown endpoint names in rosters and overrides, read defensively from raw data."""
    endpoints = data.get("endpoints")
    known = set(endpoints) if isinstance(endpoints, dict) else set()
    errors: list[tuple[str, str]] = []
    overrides = data.get("breaker_overrides")
    for route in overrides if isinstance(overrides, dict) else ():
        if route not in known:
            errors.append((f"breaker_overrides.{route}", f"unknown endpoint {route!r}"))
    roles = data.get("roles")
    for key, role in roles.items() if isinstance(roles, dict) else ():
        roster = role.get("roster") if isinstance(role, dict) else None
        if not isinstance(roster, dict):
            continue
        for tier in (0, 1, 2):
            routes = roster.get(f"tier{tier}")
            for i, route in enumerate(routes if isinstance(routes, list) else ()):
                if isinstance(route, str) and route not in known:
                    errors.append(
                        (f"roles.{key}.roster.tier{tier}[{i}]", f"unknown endpoint {route!r}")
                    )
    return errors
