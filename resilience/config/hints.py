"""Hints that make a policy error fixable: the field meant, the endpoints known.

A field the models do not have (pydantic's "Extra inputs are not permitted") becomes
``unknown field; did you mean `ttft_budget_ms`?`` (the closest field of the model at that
path, when one is close); an unknown endpoint name gets the list of the policy's
endpoints. Pure: the caller passes the raw policy data the errors came from.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
EXTRA_FORBIDDEN = "Extra inputs are not permitted"


def path_parts(path: str) -> list[str | int]:
    """``roles.a.roster.tier0[1]`` -> ``["roles", "a", "roster", "tier0", 1]``."""
    return [int(i) if i else name for name, i in _PART.findall(path)]


def _inner(ann: Any) -> list[Any]:
    """The annotation's candidates: itself, or the members of a union / Optional."""
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(ann) if a is not type(None)]
    if typing.get_origin(ann) is typing.Annotated:
        return _inner(typing.get_args(ann)[0])
    return [ann]


def _step(ann: Any, part: str | int) -> Any:
    for cand in _inner(ann):
        origin, args = typing.get_origin(cand), typing.get_args(cand)
        if isinstance(cand, type) and issubclass(cand, BaseModel) and isinstance(part, str):
            for name, field in cand.model_fields.items():
                if part in (name, field.alias):
                    return field.annotation
        elif origin is dict and len(args) == 2 and isinstance(part, str):
            return args[1]
        elif origin in (list, tuple) and args and isinstance(part, int):
            return args[0]
    return None


def model_at(root: type[BaseModel], parts: list[str | int]) -> type[BaseModel] | None:
    """The pydantic model whose fields sit at ``parts`` under ``root`` (None if none)."""
    ann: Any = root
    for part in parts:
        ann = _step(ann, part)
        if ann is None:
            return None
    models = [c for c in _inner(ann) if isinstance(c, type) and issubclass(c, BaseModel)]
    return models[0] if models else None


def field_names(model: type[BaseModel]) -> list[str]:
    """Every name a YAML key may use for a field of ``model`` (names and aliases)."""
    names = []
    for name, field in model.model_fields.items():
        if not field.exclude:
            names.append(field.alias or name)
    return names


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word`` when one is close enough to be the one meant."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_field(root: type[BaseModel], path: str) -> str:
    """The message for an unknown field at ``path``: the field meant, when one is close."""
    parts = path_parts(path)
    model = model_at(root, parts[:-1]) if parts else None
    meant = closest(str(parts[-1]), field_names(model)) if model and parts else None
    if meant:
        return f"unknown field; did you mean `{meant}`?"
    return "unknown field (`failover config schema` lists the fields)"


def unknown_endpoint(message: str, known: Iterable[str]) -> str:
    """``unknown endpoint 'x'`` with the endpoints the policy has (and the one meant)."""
    names = sorted(known)
    match = re.match(r"unknown endpoint '([^']*)'", message)
    meant = closest(match.group(1), names) if match else None
    hint = f"did you mean {meant!r}? " if meant else ""
    return f"{message}; {hint}known endpoints: {', '.join(names) or 'none'}"


def with_hints(
    errors: list[tuple[str, str]], root: type[BaseModel], data: Any
) -> list[tuple[str, str]]:
    """``errors`` with unknown fields and unknown endpoint names explained."""
    endpoints = data.get("endpoints") if isinstance(data, dict) else None
    known = [str(k) for k in endpoints] if isinstance(endpoints, dict) else []
    out = []
    for path, msg in errors:
        if msg == EXTRA_FORBIDDEN:
            msg = unknown_field(root, path)
        elif msg.startswith("unknown endpoint '") and "known endpoints" not in msg:
            msg = unknown_endpoint(msg, known)
        out.append((path, msg))
    return out
