"""Griffe extension: lazily exported names become aliases griffe can document.

``agent_failover`` and ``agent_failover.testing`` load their public names on first use
(PEP 562) from a literal ``_EXPORTS = {"name": "defining.module", ...}`` mapping, so a
static reader sees the names in ``__all__`` but no objects behind them. For every module
with such a mapping this adds ``name -> defining.module.name`` as an alias, which griffe
then resolves like an import. Names the module already binds (e.g. in its
``if TYPE_CHECKING:`` block) are left as they are.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe

MAPPING = "_EXPORTS"


def _exports(node: ast.AST) -> dict[str, str]:
    for statement in getattr(node, "body", []):
        if isinstance(statement, ast.AnnAssign):
            target, value = statement.target, statement.value
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == MAPPING and value is not None:
            mapping = ast.literal_eval(value)
            if isinstance(mapping, dict):
                return {str(k): str(v) for k, v in mapping.items()}
    return {}


class LazyExports(griffe.Extension):
    """Adds an alias per entry of a module's ``_EXPORTS`` mapping."""

    def on_module_members(
        self, *, node: ast.AST | griffe.ObjectNode, mod: griffe.Module, **kwargs: Any
    ) -> None:
        if not isinstance(node, ast.AST):
            return  # inspected modules already hold the real objects
        for name, module in _exports(node).items():
            if name not in mod.members:
                mod.set_member(name, griffe.Alias(name, f"{module}.{name}", parent=mod))
