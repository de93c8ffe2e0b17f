"""Static facts about the source tree, read with ``ast``: the module import graph and the
sizes of modules, classes and functions. ``tests/test_package.py`` and
``tests/test_structure.py`` assert on them; ``python -m tests.structure`` prints the
offenders for a developer splitting a module.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The repository folders installed under ``agent_failover`` (pyproject's package-dir).
PACKAGES = (
    "agent_failover", "workflows", "activities", "resilience", "providers", "stores",
    "telemetry", "cli", "config", "datasets", "testing",
)  # fmt: skip
MAX_MODULE_LINES = 500
MAX_CLASS_METHODS = 20
MAX_FUNCTION_LINES = 50


def module_name(path: Path) -> str:
    """The dotted name a repository file is installed as (``workflows/x.py`` ->
    ``agent_failover.workflows.x``)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] != "agent_failover":
        parts.insert(0, "agent_failover")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def production_files() -> list[Path]:
    """Every Python file of the installed package, the simulator included."""
    return sorted(p for top in PACKAGES for p in (ROOT / top).rglob("*.py"))


def _targets(node: ast.AST, package: str, known: set[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names if a.name in known)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        for candidate in (module, *(f"{module}.{a.name}" for a in node.names)):
            if candidate in known:
                yield candidate


def module_import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports anywhere in its body (lazy ones too)."""
    files = {module_name(p): p for p in production_files()}
    known = set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(), str(path))
        edges = {t for node in ast.walk(tree) for t in _targets(node, package, known)}
        graph[name] = edges - {name}
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components (iterative: deep graphs do not recurse)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


@dataclass(frozen=True)
class Offender:
    """One module, class or function over its size limit."""

    kind: str
    where: str
    size: int
    limit: int

    def __str__(self) -> str:
        return f"{self.kind} {self.where}: {self.size} > {self.limit}"


def _is_cli_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A Typer command: its length is a declarative block of options, one per parameter."""
    return any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "command"
        for d in node.decorator_list
    )


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines from its ``def`` to its end, without its docstring."""
    lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            lines -= first.end_lineno - first.lineno + 1  # type: ignore[operator]
    return lines


def _offenders_in(path: Path) -> Iterator[Offender]:
    rel = str(path.relative_to(ROOT))
    source = path.read_text()
    n_lines = len(source.splitlines())
    if n_lines > MAX_MODULE_LINES:
        yield Offender("module", rel, n_lines, MAX_MODULE_LINES)
    for node in ast.walk(ast.parse(source, rel)):
        if isinstance(node, ast.ClassDef):
            methods = [
                b for b in node.body if isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            if len(methods) > MAX_CLASS_METHODS:
                yield Offender("class", f"{rel}:{node.name}", len(methods), MAX_CLASS_METHODS)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            size = _body_lines(node)
            if size > MAX_FUNCTION_LINES and not _is_cli_command(node):
                where = f"{rel}:{node.lineno}:{node.name}"
                yield Offender("function", where, size, MAX_FUNCTION_LINES)


def size_offenders(paths: Iterable[Path] | None = None) -> list[Offender]:
    """Every module, class and function of the package over its limit."""
    return [o for p in (paths or production_files()) for o in _offenders_in(p)]


if __name__ == "__main__":
    found = size_offenders()
    for offender in found:
        print(offender)
    cycles = [c for c in strongly_connected(module_import_graph()) if len(c) > 1]
    for cycle in cycles:
        print("cycle:", " <-> ".join(sorted(cycle)))
    sys.exit(1 if found or cycles else 0)
