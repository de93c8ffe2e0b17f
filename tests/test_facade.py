"""The public façade: one mapping behind ``__all__``, mirrored for type checkers, and the
documented submodules (``saga``, ``visibility``) each with a docstring and an exact ``__all__``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

import agent_failover

INIT = Path(agent_failover.__file__)
#: The public submodules beside the top level, each re-exporting from private modules.
SUBMODULES = ("agent_failover.saga", "agent_failover.visibility")


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """Name -> module of every import under ``if TYPE_CHECKING:`` at the module's top level."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.unparse(stmt)
                for alias in stmt.names:
                    # ``X as X``: an explicit re-export for type checkers, never a rename.
                    assert alias.asname in (None, alias.name), ast.unparse(stmt)
                    assert alias.name not in found, f"{alias.name} imported twice"
                    found[alias.name] = stmt.module
    return found


def test_type_checking_imports_equal_the_mapping() -> None:
    """The ``TYPE_CHECKING`` block imports exactly the mapping's names, each from its module."""
    tree = ast.parse(INIT.read_text(), str(INIT))
    assert _type_checking_imports(tree) == agent_failover._EXPORTS


def test_all_is_generated_from_the_mapping() -> None:
    """``__all__`` is the mapping's names (and the version), sorted; ``dir`` shows the same."""
    assert agent_failover.__all__ == ["__version__", *sorted(agent_failover._EXPORTS)]
    assert dir(agent_failover) == sorted(agent_failover.__all__)


def test_each_name_comes_from_its_mapped_module() -> None:
    """A public name is the very object its private module defines (no copies, no wrappers)."""
    for name, module in agent_failover._EXPORTS.items():
        assert getattr(agent_failover, name) is getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("name", SUBMODULES)
def test_submodules_are_documented_and_exact(name: str) -> None:
    """Each public submodule opens with a docstring and lists exactly what it re-exports."""
    module = importlib.import_module(name)
    assert module.__doc__ and len(module.__doc__.split()) > 20
    public = {n for n, v in vars(module).items() if not isinstance(v, ModuleType)}
    assert sorted(module.__all__) == sorted(n for n in public if not n.startswith("_"))


def test_no_name_is_public_twice() -> None:
    """A name lives at the top level or in one submodule, never in two places."""
    homes: dict[str, list[str]] = {}
    for name in agent_failover._EXPORTS:
        homes.setdefault(name, []).append("agent_failover")
    for sub in SUBMODULES:
        for name in importlib.import_module(sub).__all__:
            homes.setdefault(name, []).append(sub)
    assert {n: h for n, h in homes.items() if len(h) > 1} == {}
