"""Tests mirror the code: a behaviour's tests are found by its module's path.

In a test folder that mirrors a package (``tests/workflows`` for ``workflows/``), every
test file is named ``test_<module>[_<behaviour>].py`` after a module of that package, so
``tests/workflows/test_resilient*.py`` holds the tests of ``workflows/resilient.py``.
Tests of the top-level modules (``worker.py``, ``agent_failover/*.py``) sit in ``tests/``.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Test folder -> the package it mirrors.
MIRRORS = {
    "activities": "activities",
    "providers": "providers",
    "stores": "stores",
    "workflows": "workflows",
    "resilience": "resilience",
    "telemetry": "telemetry",
    "cli": "cli",
    "config": "config",
}


def misplaced(tests_dir: Path, package_dir: Path) -> list[str]:
    """Test files of ``tests_dir`` whose name starts with no module of ``package_dir``."""
    modules = {p.stem for p in package_dir.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in package_dir.iterdir() if (p / "__init__.py").exists()}
    return sorted(
        t.name
        for t in tests_dir.glob("test_*.py")
        if not any(t.stem == f"test_{m}" or t.stem.startswith(f"test_{m}_") for m in modules)
    )


def test_every_test_file_is_named_after_a_module_it_tests() -> None:
    """Each misplaced file is named with the folder it sits in."""
    found = {
        folder: bad
        for folder, package in MIRRORS.items()
        if (bad := misplaced(ROOT / "tests" / folder, ROOT / package))
    }
    assert found == {}


def test_the_layout_check_finds_a_misnamed_file(tmp_path: Path) -> None:
    """The check can fail: ``test_failover.py`` names no module of a package holding
    ``resilient.py``, while ``test_resilient_hedging.py`` does."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "resilient.py").write_text("")
    (tmp_path / "tests").mkdir()
    for name in ("test_failover.py", "test_resilient_hedging.py", "test_resilient.py"):
        (tmp_path / "tests" / name).write_text("")
    assert misplaced(tmp_path / "tests", tmp_path / "pkg") == ["test_failover.py"]
