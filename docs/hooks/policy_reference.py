"""MkDocs hook: the policy reference's tables, generated from the pydantic models.

The page ``docs/policy.md`` holds hand-written prose and one marker line,
``<!-- policy-reference -->``; on build the marker becomes one table per model reachable
from ``PolicyConfig`` (field, type, default, constraints, description), walked through
``model_fields`` and the fields' annotations, so a field added to a model shows up here
without anyone editing the docs. ``render_policy_reference()`` is importable on its own,
which is how tests/test_docs.py checks that every field is listed.
"""

from __future__ import annotations

import enum
import html
import json
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

MARKER = "<!-- policy-reference -->"
ROOT_MODEL = "agent_failover.resilience.config.PolicyConfig"

# Constraint attributes pydantic keeps in FieldInfo.metadata (annotated_types objects and
# pydantic's own general metadata), with the symbol each is written with.
_CONSTRAINTS = (
    ("ge", ">="),
    ("gt", ">"),
    ("le", "<="),
    ("lt", "<"),
    ("min_length", "min length"),
    ("max_length", "max length"),
    ("pattern", "pattern"),
)


def _root() -> type[BaseModel]:
    module, _, name = ROOT_MODEL.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


def _nested_models(annotation: Any) -> Iterator[type[BaseModel]]:
    """Every pydantic model inside an annotation (``dict[str, X]``, ``X | None``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _nested_models(arg)


def reachable_models() -> list[tuple[type[BaseModel], list[str]]]:
    """``PolicyConfig`` and every model reachable from its fields, breadth first, each with
    the YAML paths that lead to it (``endpoints.<name>``), through each parent's first path."""
    root = _root()
    found: dict[type[BaseModel], list[str]] = {root: [""]}
    queue = [root]
    while queue:
        model = queue.pop(0)
        for name, field in model.model_fields.items():
            path = f"{found[model][0]}.{name}".lstrip(".")
            if _is_mapping(field.annotation):
                path += ".<name>"
            elif _is_list(field.annotation):
                path += "[]"
            for sub in _nested_models(field.annotation):
                if sub not in found:
                    found[sub] = []
                    queue.append(sub)
                if path not in found[sub]:
                    found[sub].append(path)
    return list(found.items())


def _is_mapping(annotation: Any) -> bool:
    return typing.get_origin(annotation) is dict or any(
        typing.get_origin(a) is dict for a in typing.get_args(annotation)
    )


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is list or any(
        typing.get_origin(a) is list for a in typing.get_args(annotation)
    )


def _type_name(annotation: Any, models: set[type[BaseModel]]) -> str:
    """A readable type: model names link to their table, enums and literals list values."""
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in models:
            return f'<a href="#{annotation.__name__.lower()}">{_esc(annotation.__name__)}</a>'
        return _esc(annotation.__name__)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = ", ".join(repr(m.value) for m in annotation)
        return f"{_esc(annotation.__name__)} ({_esc(values)})"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " &#124; ".join(_esc(repr(a)) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " &#124; ".join(_type_name(a, models) for a in args)
    if origin is not None:
        inner = ", ".join(_type_name(a, models) for a in args)
        return f"{_esc(getattr(origin, '__name__', str(origin)))}&#91;{inner}&#93;"
    if annotation is Any:
        return "Any"
    return _esc(getattr(annotation, "__name__", str(annotation)))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "its defaults"
    else:
        value = field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, enum.Enum):
        value = value.value
    # as the YAML file writes it (null, true, "global"), not as Python prints it
    return _code(json.dumps(value, default=str))


def _constraints(field: FieldInfo) -> str:
    parts = []
    for item in field.metadata:
        for attr, symbol in _CONSTRAINTS:
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{symbol} {_code(str(value))}")
    return ", ".join(parts)


def _esc(text: str) -> str:
    """HTML-escaped text that Markdown leaves alone inside a table cell (no links, no
    emphasis, no column breaks)."""
    escaped = html.escape(text)
    for char in "[]|*_`\\":
        escaped = escaped.replace(char, f"&#{ord(char)};")
    return escaped


def _code(text: str) -> str:
    return f"<code>{_esc(text)}</code>"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render_model(model: type[BaseModel], paths: list[str], models: set[type[BaseModel]]) -> str:
    """One model's table: field, type, default (or "required"), constraints, description."""
    where = ", ".join(f"`{p}`" if p else "the top level of the file" for p in paths)
    lines = [
        f"### {model.__name__} {{#{model.__name__.lower()}}}",
        "",
        f"At {where} (`{model.__module__}.{model.__name__}`).",
        "",
        "| field | type | default | constraints | description |",
        "|---|---|---|---|---|",
    ]
    for name, field in model.model_fields.items():
        lines.append(
            f"| `{name}` | <code>{_type_name(field.annotation, models)}</code> "
            f"| {_default(field)} | {_constraints(field)} | {_cell(field.description or '')} |"
        )
    return "\n".join(lines) + "\n"


def render_policy_reference() -> str:
    """The generated part of the policy reference: a table per reachable model."""
    found = reachable_models()
    models = {model for model, _ in found}
    return "\n".join(render_model(model, paths, models) for model, paths in found)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: put the generated tables where the page has the marker."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_policy_reference())
