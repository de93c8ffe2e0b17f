"""The installed shape: one import name, a small lazy public surface, imports pointing down."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import agent_failover
from tests.structure import module_import_graph, strongly_connected

ROOT = Path(__file__).resolve().parents[1]
#: Every package of ours (the repository folder) -> the packages it may import, lowest first.
#: ``agent_failover`` is the façade and the worker wiring (plugin, service, contrib); only
#: the entry points (``cli``) and the test helpers users import (``testing``) sit above it.
_CORE = {"resilience", "telemetry", "datasets"}
LAYERS: dict[str, set[str]] = {
    "resilience": set(),
    "telemetry": set(),
    "datasets": set(),
    "config": {"providers", *_CORE},
    "providers": {"resilience", "telemetry"},
    "stores": {"resilience", "telemetry"},
    "activities": {"providers", "stores", "config", *_CORE},
    "workflows": {"activities", "providers", *_CORE},
    "agent_failover": {"workflows", "activities", "providers", "stores", "config", *_CORE},
    "testing": {
        "agent_failover", "workflows", "activities", "providers", "stores", "config", *_CORE,
    },
    "cli": {
        "testing", "agent_failover", "workflows", "activities", "providers", "stores",
        "config", *_CORE,
    },
}  # fmt: skip
OLD_TOP_LEVEL = {
    "workflows", "activities", "resilience", "providers", "stores",
    "telemetry", "cli", "config", "sim", "worker", "testing", "tests",
}  # fmt: skip


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def _package_files() -> list[Path]:
    return [p for f in LAYERS for p in (ROOT / f).rglob("*.py")]


def test_public_names_resolve_and_all_is_exact() -> None:
    """Every name in ``__all__`` resolves; ``__all__`` lists exactly the lazy exports."""
    for name in agent_failover.__all__:
        assert getattr(agent_failover, name) is not None
    assert set(agent_failover.__all__) == {*agent_failover._EXPORTS, "__version__"}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        agent_failover.nope  # noqa: B018


def test_importing_the_package_loads_no_worker_code() -> None:
    """``import agent_failover`` stays cheap (it runs inside the workflow sandbox)."""
    code = (
        "import sys, agent_failover; heavy = [m for m in ('agent_failover.plugin', "
        "'agent_failover.activities.llm', 'redis', 'httpx', 'aiohttp', 'pydantic_ai', "
        "'agents', 'temporalio.openai_agents') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    )
    assert out.stdout.strip() == "[]"


#: Agent frameworks: optional extras, imported only by agent_failover/contrib/.
FRAMEWORKS = {"pydantic_ai", "pydantic_graph", "agents", "openai"}


def test_only_contrib_imports_agent_frameworks() -> None:
    """The core never imports PydanticAI or the Agents SDK; agent_failover.contrib does."""
    contrib = ROOT / "agent_failover" / "contrib"
    bad = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in _package_files()
        if contrib not in p.parents
        for name in _imports(p)
        if name.split(".")[0] in FRAMEWORKS or name.startswith("temporalio.openai_agents")
    ]
    assert bad == []
    used = {n.split(".")[0] for p in contrib.rglob("*.py") for n in _imports(p)}
    assert {"pydantic_ai", "agents"} <= used


def test_package_code_uses_the_namespace_only() -> None:
    """No package module imports a bare top-level name of ours or the test suite."""
    bad = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in _package_files()
        for name in _imports(p)
        if name.split(".")[0] in OLD_TOP_LEVEL
    ]
    assert bad == []


def _layer(module: str) -> str | None:
    """The package of ours a dotted module name belongs to (None: not ours)."""
    parts = module.split(".")
    if parts[0] != "agent_failover":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "agent_failover"


def test_layers_cover_every_package() -> None:
    """Every package folder mapped into ``agent_failover`` has a place in the layer order."""
    # examples/ is mapped too, but holds user projects shipped as files (they import their
    # own top-level `workflows`/`activities`), not a layer of ours.
    mapped = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "examples"}
    assert mapped == set(LAYERS)


def test_imports_point_down() -> None:
    """No module imports a package above its own (the DESIGN's layer order), lazily or not."""
    bad = []
    for layer, allowed in LAYERS.items():
        for path in (ROOT / layer).rglob("*.py"):
            for name in _imports(path):
                target = _layer(name)
                if target is not None and target != layer and target not in allowed:
                    bad.append(f"{path.relative_to(ROOT)} -> {name}")
    assert bad == []


def test_no_import_cycles() -> None:
    """The module import graph of every package has no cycle, counting imports inside
    functions too (a lazy import that breaks a cycle still hides one)."""
    graph = module_import_graph()
    cycles = [sorted(c) for c in strongly_connected(graph) if len(c) > 1]
    assert cycles == []


def test_benchmarks_do_not_import_the_test_suite() -> None:
    bad = [str(p) for p in (ROOT / "bench").rglob("*.py") if any(
        n.split(".")[0] == "tests" for n in _imports(p))]  # fmt: skip
    assert bad == []


def test_wheel_installs_one_import_name(tmp_path: Path) -> None:
    """The built wheel holds ``agent_failover`` (with the card's folders mapped in) and nothing
    else at top level; the shipped policy and scenarios are inside it."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("agent_failover-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"agent_failover"}
    top_level = next(n for n in names if n.endswith("top_level.txt")) if any(
        n.endswith("top_level.txt") for n in names) else None  # fmt: skip
    if top_level is not None:
        assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["agent_failover"]
    for required in (
        "agent_failover/workflows/pipeline.py",
        "agent_failover/resilience/planner.py",
        "agent_failover/config/policy.yaml",
        "agent_failover/testing/sim/scenarios/outage_demo.yaml",
        "agent_failover/plugin.py",
        "agent_failover/py.typed",
        "agent_failover/contrib/pydantic_ai.py",
        "agent_failover/contrib/openai_agents.py",
        "agent_failover/testing/history.py",
    ):
        assert required in names
    assert not any(n.startswith(("agent_failover/tests", "agent_failover/bench")) for n in names)
