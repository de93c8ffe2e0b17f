"""MkDocs hook: lay the sources out as the installed ``agent_failover`` namespace for griffe.

The repository keeps one folder per layer (``workflows/``, ``resilience/``, ...) and
pyproject.toml's ``package-dir`` maps each into ``agent_failover.<folder>``. Griffe, which
mkdocstrings uses to read the API statically, finds a package by its folder, so it would
see ``agent_failover/`` alone and none of the modules the façade re-exports. This hook
builds ``build/api-src/agent_failover/``: symlinks to the files of ``agent_failover/`` and
to every mapped folder, read from pyproject.toml (so a new package needs no edit here).
mkdocs.yml points mkdocstrings' ``paths`` at ``build/api-src``.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "build" / "api-src"
PACKAGE = "agent_failover"


def _link(target: Path, link: Path) -> None:
    """Point ``link`` at ``target``, leaving a correct link alone (builds may overlap)."""
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target, target_is_directory=target.is_dir())


def build_tree(root: Path = ROOT, tree: Path = TREE) -> Path:
    """Create (or refresh) the namespace tree under ``tree`` and return it."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir: dict[str, str] = pyproject["tool"]["setuptools"]["package-dir"]
    package = tree / PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    for child in (root / package_dir[PACKAGE]).iterdir():
        if child.name != "__pycache__":
            _link(child, package / child.name)
    for name, folder in package_dir.items():
        sub = name.removeprefix(f"{PACKAGE}.")
        if name != PACKAGE and "." not in sub:  # nested packages come with their folder
            _link(root / folder, package / sub)
    return tree


def on_config(config: Any) -> Any:
    """MkDocs hook: the tree is current before mkdocstrings reads its first object."""
    build_tree()
    return config


# Built on import too: MkDocs imports hooks while it validates the configuration, before
# any plugin's on_config, and mkdocstrings drops a ``paths`` entry that does not exist yet
# (a fresh clone's first build would then find ``agent_failover`` without its folders).
build_tree()
