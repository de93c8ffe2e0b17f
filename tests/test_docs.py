"""The manual: the MkDocs site builds strictly, its policy reference is complete, and the
README stays the front door (short, the two commands as CI runs them, a full repository map).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

from agent_failover.resilience.config import PolicyConfig

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _policy_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "policy_reference", ROOT / "docs" / "hooks" / "policy_reference.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _models_reachable_from(root: type[BaseModel]) -> set[type[BaseModel]]:
    def nested(annotation: object) -> typing.Iterator[type[BaseModel]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield annotation
        for arg in typing.get_args(annotation):
            yield from nested(arg)

    seen, todo = {root}, [root]
    while todo:
        for field in todo.pop().model_fields.values():
            for model in nested(field.annotation):
                if model not in seen:
                    seen.add(model)
                    todo.append(model)
    return seen


@pytest.mark.timeout(240)
def test_site_builds_strictly_and_policy_page_lists_every_field(tmp_path: Path) -> None:
    """`mkdocs build --strict` succeeds and the policy page names every PolicyConfig field."""
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    page = (site / "policy" / "index.html").read_text(encoding="utf-8")
    missing = [name for name in PolicyConfig.model_fields if f"<code>{name}</code>" not in page]
    assert not missing, missing


def test_readme_is_short_with_the_ci_commands_and_a_full_repository_map() -> None:
    """README is at most 300 lines, holds both commands as CI runs them, maps every package."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300

    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = next(line for line in ci.splitlines() if "pytest" in line).strip()
    install = test_command.rsplit(" && ", 1)[0]
    two = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    fences = re.findall(r"```bash\n(.*?)\n```", two, flags=re.S)
    assert fences == [f"{install} && .venv/bin/failover demo", test_command]

    repo_map = text.split("## Repository map", 1)[1].split("\n## ", 1)[0]
    packages = sorted(
        p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"
    )
    assert packages
    assert [p for p in packages if f"| `{p}/` |" not in repo_map] == []


def test_policy_reference_lists_every_field_of_every_reachable_model() -> None:
    """render_policy_reference() has a table row for each field of each model under PolicyConfig."""
    rendered = _policy_hook().render_policy_reference()
    sections = dict(re.findall(r"^### (\w+) \{#\w+\}\n(.*?)(?=^### |\Z)", rendered, re.M | re.S))
    models = _models_reachable_from(PolicyConfig)
    assert {m.__name__ for m in models} <= set(sections)
    for model in models:
        missing = [f for f in model.model_fields if f"| `{f}` |" not in sections[model.__name__]]
        assert not missing, (model.__name__, missing)
